package localrun

import (
	"embed"
	"io/fs"
	"net/http"
)

// The chat page: static HTML, CSS and JavaScript, embedded, with no build
// step. It talks to the local run's API like any other client.
//
//go:embed page
var pageFiles embed.FS

// Page serves the chat page at / and its files under /static/.
func Page() http.Handler {
	files, _ := fs.Sub(pageFiles, "page") // the directory is embedded
	static := http.StripPrefix("/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, files, "index.html")
			return
		}
		static.ServeHTTP(w, r)
	})
}
