// Package agui is the AG-UI example front end: a page (index.html, app.js)
// that talks to POST /agui with the official client, and its server
// (server.mjs), in JavaScript. Its Go tests drive the page in headless
// Chromium against the local run, as README.md runs it, and hold the
// server's proxy to streaming what it passes on.
package agui
