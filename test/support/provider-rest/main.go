// terraform-provider-rest: a Terraform provider for JSON objects on a REST server
// (POST /api/objects, GET|PUT|DELETE /api/objects/{id}), the shape of the restapi provider's
// fakeserver. The drift test bed manages objects with it and changes them out of band: a read
// that finds the server's object different from the state reports the server's JSON, so the
// engine shows real update-in-place drift; a read that finds the object gone removes it from
// state (drift delete).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

const version = "0.1.0"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), newProvider, providerserver.ServeOpts{
		Address: "registry.terraform.io/kumoss/rest",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}
