// terraform-provider-aws (kumoss/aws): a test double of hashicorp/aws, limited to the resources
// Kumoss's real-root test bed needs — aws_security_group, aws_vpc_security_group_ingress_rule,
// aws_s3_bucket, aws_s3_bucket_versioning, aws_iam_role and aws_instance. Their schemas and plan
// JSON follow their hashicorp/aws namesakes (the SDKv2 schema types, the nested-block sets, tags
// and tags_all), and they store through the real EC2, S3 and IAM APIs — in moto on these machines,
// because the Go module proxy refuses hashicorp/terraform-provider-aws here. A root declares it as
// `aws = { source = "kumoss/aws" }`, so its HCL reads exactly like a real root's.
package main

import (
	"flag"

	"github.com/hashicorp/terraform-plugin-sdk/v2/plugin"
)

const version = "0.1.0"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run with support for debuggers like delve")
	flag.Parse()
	plugin.Serve(&plugin.ServeOpts{
		ProviderFunc: newProvider,
		ProviderAddr: "registry.terraform.io/kumoss/aws",
		Debug:        debug,
	})
}
