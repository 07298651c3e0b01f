// The Kubernetes provider's own main package (provider/v4/cmd/pulumi-resource-kubernetes: main.go) embeds
// schema-embed.json, which its release build generates from the module's schema.json (generate.go: the schema with
// its version set, and the Terraform mapping, each re-serialized) and which the module therefore lacks. This is that
// main package over the same library call; build.py writes the two files here, from the module, before go build.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
