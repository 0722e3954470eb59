# Conveniences; the README's commands need only Go.
.PHONY: test local bench fuzz reliability ci

test:
	go test -race ./...

local:
	go run ./cmd/local

bench:
	go run ./cmd/bench

fuzz:
	.ci/fuzz.sh 2m RELIABILITY.md

reliability:
	RELIABILITY_MD=$(CURDIR)/RELIABILITY.md go test -count=1 ./tests/reliability

ci:
	bash .ci/run
