// Package deploy checks the deployment files: the SAM template and samconfig.toml.
package deploy
