module github.com/causeway-stream/causeway

go 1.26

require (
	github.com/google/btree v1.1.3
	github.com/stretchr/testify v1.12.1
	pgregory.net/rapid v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
