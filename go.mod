module github.com/hapsuper/hapsuper

go 1.26.8

require (
	github.com/haproxytech/client-native/v5 v5.1.27
	github.com/lmittmann/tint v1.2.1
	github.com/oklog/run v1.2.0
	golang.org/x/sys v0.50.0
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require (
	github.com/gofrs/flock v0.13.0 // indirect
	github.com/google/renameio v1.0.1 // indirect
	github.com/haproxytech/go-logger v1.1.0 // indirect
)
