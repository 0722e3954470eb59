// Package deploy holds the deployment suite: tests that hold the SAM
// template, samconfig.toml and the docs' deployment examples to the code
// (the functions' configuration, routes, least-privilege policies, the
// dashboard and alarms, cfn-lint and SAM's own transform where they are
// installed), and that every relative link of the README and docs/
// resolves.
package deploy
