// Package app builds what the functions serve from their configuration: the
// environment is read into a Config, checked once at init, and wired into the
// agent, the session store, the turn service and the HTTP handler, with the
// agent's hooks: one logs every failed tool run. The Lambda functions and the
// local run share it, so they cannot drift apart.
package app
