module github.com/kumoss/kumoss/worker/egress-relay

go 1.25.0
