# `opa test policies/`: the shipped AWS policies on small plans (test/shared/policies.test.ts runs it).
package kumoss.compliance_test

import rego.v1

import data.kumoss.compliance

sg(ingress, tags) := {"resource_changes": [{
	"address": "aws_security_group.web",
	"type": "aws_security_group",
	"change": {"actions": ["update"], "after": {"ingress": ingress, "tags": tags}},
}]}

rule(from, to, cidr) := {"from_port": from, "to_port": to, "protocol": "tcp", "cidr_blocks": [cidr]}

test_https_from_anywhere_is_allowed if {
	count(compliance.deny) == 0 with input as sg([rule(443, 443, "0.0.0.0/0")], {"Name": "web"})
}

test_ssh_from_anywhere_is_denied if {
	compliance.deny == {"aws_security_group.web: ingress from the whole internet on admin port 22"} with input as sg([rule(22, 22, "0.0.0.0/0")], {"Name": "web"})
}

test_a_range_covering_rdp_is_denied if {
	"aws_security_group.web: ingress from the whole internet on admin port 3389" in compliance.deny with input as sg([rule(3000, 4000, "0.0.0.0/0")], {"Name": "web"})
}

test_ssh_from_a_private_range_is_allowed if {
	count(compliance.deny) == 0 with input as sg([rule(22, 22, "10.0.0.0/8")], {"Name": "web"})
}

test_unchanged_resources_are_not_audited if {
	plan := {"resource_changes": [{
		"address": "aws_security_group.old",
		"type": "aws_security_group",
		"change": {"actions": ["no-op"], "after": {"ingress": [rule(22, 22, "0.0.0.0/0")], "tags": {}}},
	}]}
	count(compliance.deny) == 0 with input as plan
	count(compliance.warn) == 0 with input as plan
}

test_missing_name_tag_warns if {
	compliance.warn == {"aws_security_group.web: missing the required tag Name"} with input as sg([], {"Team": "a"})
}

bucket_plan(versioning) := {
	"resource_changes": [{"address": "aws_s3_bucket.logs", "type": "aws_s3_bucket", "change": {"actions": ["create"], "after": {"tags": {"Name": "logs"}}}}],
	"configuration": {"root_module": {"resources": versioning}},
}

test_unversioned_bucket_is_denied if {
	"aws_s3_bucket.logs: bucket without versioning (add an aws_s3_bucket_versioning with status \"Enabled\")" in compliance.deny with input as bucket_plan([])
}

test_versioned_bucket_is_allowed if {
	count(compliance.deny) == 0 with input as bucket_plan([{
		"type": "aws_s3_bucket_versioning",
		"expressions": {
			"bucket": {"references": ["aws_s3_bucket.logs.id", "aws_s3_bucket.logs"]},
			"versioning_configuration": [{"status": {"constant_value": "Enabled"}}],
		},
	}])
}
