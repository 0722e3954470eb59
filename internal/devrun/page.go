package devrun

import (
	"embed"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
)

// The chat page: static HTML, CSS and JavaScript, embedded, with no build
// step. It talks to the local run's API like any other client.
//
//go:embed page
var pageFiles embed.FS

// Page serves the chat page at / and its files as /static/{name}. It serves
// files by name, never a directory, and so never redirects, as a file
// server does from a directory, or from index.html, to a path of its own.
func Page() http.Handler {
	files, _ := fs.Sub(pageFiles, "page") // the directory is embedded
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		name := r.PathValue("name")
		if r.URL.Path == "/" {
			name = "index.html"
		}
		f, err := files.Open(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		content, ok := f.(io.ReadSeeker) // embedded files are
		if err != nil || st.IsDir() || !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, st.ModTime(), content)
	})
}

// InfoPath is where the local run serves its Info. It is the local run's
// own route, not the API's: a deployment has no such route.
const InfoPath = "/local/info"

// Info is what the chat page learns about the local run, so that its first
// screen can say which model answers.
type Info struct {
	// Model is "offline" for the offline model, "bedrock" otherwise.
	Model string `json:"model"`
	// ModelID is the MODEL_ID turns use.
	ModelID string `json:"model_id"`
	// Where says where the model runs, such as "Amazon Bedrock in
	// us-east-1", or for the offline model why it answers.
	Where string `json:"where"`
}

// ServeHTTP answers with the Info as JSON.
func (i Info) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, _ := json.Marshal(i) // strings only
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}
