# Kumoss's shipped compliance policies for AWS roots, evaluated by OPA against the pinned plan
# (`terraform show -json` of the generate round's plan) before it may be applied. Only resources the
# plan creates or updates are audited. `deny` blocks apply until a new round fixes it (or an admin
# overrides with a recorded reason); `warn` is reported and blocks nothing.
#
# Edit these or add files beside them (any package name under kumoss.compliance is merged); the
# cloud's directory is policies/<cloud>/ (compliance.policies_dir, KUMOSS_POLICIES_DIR).
package kumoss.compliance

import rego.v1

# Ports an administrator logs in through: never open to the whole internet.
admin_ports := {22, 3389}

# Tags every taggable resource should carry.
required_tags := {"Name"}

changed contains rc if {
	some rc in input.resource_changes
	some action in rc.change.actions
	action in {"create", "update"}
}

open_to_world(cidrs) if {
	some cidr in cidrs
	cidr in {"0.0.0.0/0", "::/0"}
}

covers_admin_port(from, to) := port if {
	some port in admin_ports
	from <= port
	port <= to
}

# Inline ingress blocks of a security group.
deny contains msg if {
	some rc in changed
	rc.type == "aws_security_group"
	some rule in rc.change.after.ingress
	open_to_world(array.concat(object.get(rule, "cidr_blocks", []), object.get(rule, "ipv6_cidr_blocks", [])))
	port := covers_admin_port(rule.from_port, rule.to_port)
	msg := sprintf("%s: ingress from the whole internet on admin port %d", [rc.address, port])
}

# Ingress rules as resources of their own.
deny contains msg if {
	some rc in changed
	rc.type == "aws_vpc_security_group_ingress_rule"
	open_to_world([object.get(rc.change.after, "cidr_ipv4", ""), object.get(rc.change.after, "cidr_ipv6", "")])
	port := covers_admin_port(rc.change.after.from_port, rc.change.after.to_port)
	msg := sprintf("%s: ingress from the whole internet on admin port %d", [rc.address, port])
}

# Buckets are versioned: an aws_s3_bucket_versioning of the root module refers to the bucket with
# status Enabled.
deny contains msg if {
	some rc in changed
	rc.type == "aws_s3_bucket"
	not versioned(rc.address)
	msg := sprintf("%s: bucket without versioning (add an aws_s3_bucket_versioning with status \"Enabled\")", [rc.address])
}

versioned(address) if {
	some r in input.configuration.root_module.resources
	r.type == "aws_s3_bucket_versioning"
	some ref in r.expressions.bucket.references
	ref in {address, concat(".", [address, "id"]), concat(".", [address, "bucket"])}
	some vc in r.expressions.versioning_configuration
	vc.status.constant_value == "Enabled"
}

warn contains msg if {
	some rc in changed
	"tags" in object.keys(object.get(rc.change, "after", {}))
	tags := object.get(rc.change.after, "tags", {})
	some tag in required_tags
	not has_tag(tags, tag)
	msg := sprintf("%s: missing the required tag %s", [rc.address, tag])
}

has_tag(tags, tag) if {
	is_object(tags)
	tags[tag]
}
