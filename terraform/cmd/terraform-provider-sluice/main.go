// Command terraform-provider-sluice serves Sluice's Terraform provider
// (terraform/provider) to Terraform over the plugin protocol, version 6.
// It only parses flags and serves; the provider holds all the logic.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/sluicehq/sluice/terraform/provider"
)

// version is set at release time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/sluicehq/sluice",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
