module github.com/moonlm/moonlm

go 1.26.0

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
