package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
)

// The ingress/egress rule set of aws_security_group: a set of objects that a root may write as
// `ingress { … }` blocks or as an attribute (hashicorp/aws's SchemaConfigModeAttr), optional and
// computed, so a group whose rules are managed elsewhere (aws_vpc_security_group_ingress_rule) does
// not drift.
func ruleSetSchema() *schema.Schema {
	return &schema.Schema{
		Type:       schema.TypeSet,
		Optional:   true,
		Computed:   true,
		ConfigMode: schema.SchemaConfigModeAttr,
		Elem: &schema.Resource{Schema: map[string]*schema.Schema{
			"cidr_blocks":      {Type: schema.TypeList, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
			"description":      {Type: schema.TypeString, Optional: true},
			"from_port":        {Type: schema.TypeInt, Required: true},
			"ipv6_cidr_blocks": {Type: schema.TypeList, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
			"prefix_list_ids":  {Type: schema.TypeList, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
			"protocol":         {Type: schema.TypeString, Required: true, StateFunc: func(v any) string { return normalizeProtocol(v.(string)) }},
			"security_groups":  {Type: schema.TypeSet, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}, Set: schema.HashString},
			"self":             {Type: schema.TypeBool, Optional: true, Default: false},
			"to_port":          {Type: schema.TypeInt, Required: true},
		}},
	}
}

func resourceSecurityGroup() *schema.Resource {
	return &schema.Resource{
		CreateContext: sgCreate,
		ReadContext:   sgRead,
		UpdateContext: sgUpdate,
		DeleteContext: sgDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		CustomizeDiff: setTagsAll,
		SchemaVersion: 1,
		Schema: map[string]*schema.Schema{
			"arn":                    {Type: schema.TypeString, Computed: true},
			"description":            {Type: schema.TypeString, Optional: true, ForceNew: true, Default: "Managed by Terraform"},
			"egress":                 ruleSetSchema(),
			"ingress":                ruleSetSchema(),
			"name":                   {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true, ConflictsWith: []string{"name_prefix"}},
			"name_prefix":            {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true, ConflictsWith: []string{"name"}},
			"owner_id":               {Type: schema.TypeString, Computed: true},
			"revoke_rules_on_delete": {Type: schema.TypeBool, Optional: true, Default: false},
			"tags":                   tagsSchema(),
			"tags_all":               tagsAllSchema(),
			"vpc_id":                 {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true},
		},
	}
}

var protocolNames = map[string]string{"6": "tcp", "17": "udp", "1": "icmp", "all": "-1", "58": "icmpv6"}

func normalizeProtocol(p string) string {
	p = strings.ToLower(p)
	if n, ok := protocolNames[p]; ok {
		return n
	}
	return p
}

func awsErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func findSecurityGroup(ctx context.Context, conn *ec2.Client, id string) (*ec2types.SecurityGroup, error) {
	out, err := conn.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil {
		if strings.Contains(awsErrorCode(err), "NotFound") {
			return nil, nil
		}
		return nil, err
	}
	if len(out.SecurityGroups) == 0 {
		return nil, nil
	}
	return &out.SecurityGroups[0], nil
}

func findGroupByName(ctx context.Context, conn *ec2.Client, name, description string) string {
	out, err := conn.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{
		Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{name}}},
	})
	if err != nil {
		return ""
	}
	for _, g := range out.SecurityGroups {
		if aws.ToString(g.Description) == description {
			return aws.ToString(g.GroupId)
		}
	}
	return ""
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	return tagList(m, func(k, v string) ec2types.Tag { return ec2types.Tag{Key: aws.String(k), Value: aws.String(v)} })
}

func ec2TagMap(tags []ec2types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

func tagSpec(kind ec2types.ResourceType, m map[string]string) []ec2types.TagSpecification {
	if len(m) == 0 {
		return nil
	}
	return []ec2types.TagSpecification{{ResourceType: kind, Tags: ec2Tags(m)}}
}

// updateEC2Tags makes the resource's tags `want`, given what it had.
func updateEC2Tags(ctx context.Context, conn *ec2.Client, id string, have, want map[string]string) error {
	set, remove := tagDiff(have, want)
	if len(remove) > 0 {
		tags := make([]ec2types.Tag, 0, len(remove))
		for _, k := range remove {
			tags = append(tags, ec2types.Tag{Key: aws.String(k)})
		}
		if _, err := conn.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id}, Tags: tags}); err != nil {
			return fmt.Errorf("removing tags of %s: %w", id, err)
		}
	}
	if len(set) > 0 {
		if _, err := conn.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(set)}); err != nil {
			return fmt.Errorf("tagging %s: %w", id, err)
		}
	}
	return nil
}

func sgCreate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	name := d.Get("name").(string)
	if name == "" {
		prefix := d.Get("name_prefix").(string)
		if prefix == "" {
			prefix = "terraform-"
		}
		name = prefix + uniqueSuffix()
	}
	in := &ec2.CreateSecurityGroupInput{
		GroupName:         aws.String(name),
		Description:       aws.String(d.Get("description").(string)),
		TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup, wantTags(d, c)),
	}
	if v, ok := d.GetOk("vpc_id"); ok {
		in.VpcId = aws.String(v.(string))
	}
	out, err := c.ec2.CreateSecurityGroup(ctx, in)
	if awsErrorCode(err) == "InvalidGroup.Duplicate" {
		// The SDK retried a create whose first attempt went through (a slow answer under load):
		// the group with our name and description is the one we made.
		if id := findGroupByName(ctx, c.ec2, name, d.Get("description").(string)); id != "" {
			out, err = &ec2.CreateSecurityGroupOutput{GroupId: aws.String(id)}, nil
		}
	}
	if err != nil {
		return diag.Errorf("creating Security Group (%s): %s", name, err)
	}
	d.SetId(aws.ToString(out.GroupId))
	// As hashicorp/aws does: AWS gives every new group an allow-all egress rule; revoke it so the
	// group holds only the rules the code declares.
	_, _ = c.ec2.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{
		GroupId: out.GroupId,
		IpPermissions: []ec2types.IpPermission{{
			IpProtocol: aws.String("-1"), FromPort: aws.Int32(0), ToPort: aws.Int32(0),
			IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}},
		}},
	})
	if err := applyRuleChanges(ctx, c.ec2, d.Id(), "ingress", nil, d.Get("ingress").(*schema.Set).List()); err != nil {
		return diag.FromErr(err)
	}
	if err := applyRuleChanges(ctx, c.ec2, d.Id(), "egress", nil, d.Get("egress").(*schema.Set).List()); err != nil {
		return diag.FromErr(err)
	}
	return sgRead(ctx, d, meta)
}

func sgRead(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	sg, err := findSecurityGroup(ctx, c.ec2, d.Id())
	if err != nil {
		return diag.Errorf("reading Security Group (%s): %s", d.Id(), err)
	}
	if sg == nil {
		d.SetId("")
		return nil
	}
	owner := aws.ToString(sg.OwnerId)
	_ = d.Set("arn", fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", c.region, owner, d.Id()))
	_ = d.Set("description", sg.Description)
	_ = d.Set("name", sg.GroupName)
	_ = d.Set("name_prefix", "")
	_ = d.Set("owner_id", owner)
	_ = d.Set("vpc_id", sg.VpcId)
	if err := d.Set("ingress", matchRules(d.Get("ingress").(*schema.Set).List(), gatherRules(sg.IpPermissions, d.Id()))); err != nil {
		return diag.FromErr(err)
	}
	if err := d.Set("egress", matchRules(d.Get("egress").(*schema.Set).List(), gatherRules(sg.IpPermissionsEgress, d.Id()))); err != nil {
		return diag.FromErr(err)
	}
	if err := setTagsOut(d, c, ec2TagMap(sg.Tags)); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func sgUpdate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	for _, kind := range []string{"ingress", "egress"} {
		if d.HasChange(kind) {
			o, n := d.GetChange(kind)
			if err := applyRuleChanges(ctx, c.ec2, d.Id(), kind, o.(*schema.Set).List(), n.(*schema.Set).List()); err != nil {
				return diag.FromErr(err)
			}
		}
	}
	if d.HasChanges("tags", "tags_all") {
		o, _ := d.GetChange("tags_all")
		if err := updateEC2Tags(ctx, c.ec2, d.Id(), stringMap(o), wantTags(d, c)); err != nil {
			return diag.FromErr(err)
		}
	}
	return sgRead(ctx, d, meta)
}

func sgDelete(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	_, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(d.Id())})
	if err != nil && !strings.Contains(awsErrorCode(err), "NotFound") {
		return diag.Errorf("deleting Security Group (%s): %s", d.Id(), err)
	}
	return nil
}

// ---- rules: the set elements and AWS IpPermissions ----

type rule struct {
	from, to       int
	protocol       string
	description    string
	cidrs, ipv6    []string
	prefixLists    []string
	securityGroups []string
	self           bool
}

func (r rule) key() string {
	return fmt.Sprintf("%d|%d|%s|%s", r.from, r.to, r.protocol, r.description)
}

func strList(v any) []string {
	var out []string
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case *schema.Set:
		return strList(t.List())
	}
	return out
}

func ruleFromMap(m map[string]any) rule {
	return rule{
		from:           m["from_port"].(int),
		to:             m["to_port"].(int),
		protocol:       normalizeProtocol(m["protocol"].(string)),
		description:    m["description"].(string),
		cidrs:          strList(m["cidr_blocks"]),
		ipv6:           strList(m["ipv6_cidr_blocks"]),
		prefixLists:    strList(m["prefix_list_ids"]),
		securityGroups: strList(m["security_groups"]),
		self:           m["self"].(bool),
	}
}

func (r rule) toMap() map[string]any {
	list := func(s []string) []any {
		out := make([]any, 0, len(s))
		for _, x := range s {
			out = append(out, x)
		}
		return out
	}
	return map[string]any{
		"from_port":        r.from,
		"to_port":          r.to,
		"protocol":         r.protocol,
		"description":      r.description,
		"cidr_blocks":      list(r.cidrs),
		"ipv6_cidr_blocks": list(r.ipv6),
		"prefix_list_ids":  list(r.prefixLists),
		"security_groups":  schema.NewSet(schema.HashString, list(r.securityGroups)),
		"self":             r.self,
	}
}

// gatherRules turns AWS's permissions into rules, one per (ports, protocol, description).
func gatherRules(perms []ec2types.IpPermission, groupID string) []rule {
	byKey := map[string]*rule{}
	var order []string
	get := func(p ec2types.IpPermission, desc string) *rule {
		r := rule{from: int(aws.ToInt32(p.FromPort)), to: int(aws.ToInt32(p.ToPort)), protocol: normalizeProtocol(aws.ToString(p.IpProtocol)), description: desc}
		if r.protocol == "-1" {
			r.from, r.to = 0, 0
		}
		k := r.key()
		if existing, ok := byKey[k]; ok {
			return existing
		}
		byKey[k] = &r
		order = append(order, k)
		return &r
	}
	for _, p := range perms {
		for _, x := range p.IpRanges {
			r := get(p, aws.ToString(x.Description))
			r.cidrs = append(r.cidrs, aws.ToString(x.CidrIp))
		}
		for _, x := range p.Ipv6Ranges {
			r := get(p, aws.ToString(x.Description))
			r.ipv6 = append(r.ipv6, aws.ToString(x.CidrIpv6))
		}
		for _, x := range p.PrefixListIds {
			r := get(p, aws.ToString(x.Description))
			r.prefixLists = append(r.prefixLists, aws.ToString(x.PrefixListId))
		}
		for _, x := range p.UserIdGroupPairs {
			r := get(p, aws.ToString(x.Description))
			if aws.ToString(x.GroupId) == groupID {
				r.self = true
			} else {
				r.securityGroups = append(r.securityGroups, aws.ToString(x.GroupId))
			}
		}
	}
	out := make([]rule, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// matchRules keeps the grouping the state (the code) uses: a recorded rule whose targets all still
// exist with the same ports, protocol and description is kept as recorded; what is left of the
// remote rules forms one element per (ports, protocol, description).
func matchRules(local []any, remote []rule) []any {
	pool := map[string]*rule{}
	var order []string
	for i := range remote {
		r := remote[i]
		pool[r.key()] = &r
		order = append(order, r.key())
	}
	var out []any
	for _, l := range local {
		lr := ruleFromMap(l.(map[string]any))
		pr, ok := pool[lr.key()]
		if !ok {
			continue
		}
		all := (!lr.self || pr.self)
		for _, c := range lr.cidrs {
			all = all && contains(pr.cidrs, c)
		}
		for _, c := range lr.ipv6 {
			all = all && contains(pr.ipv6, c)
		}
		for _, c := range lr.prefixLists {
			all = all && contains(pr.prefixLists, c)
		}
		for _, c := range lr.securityGroups {
			all = all && contains(pr.securityGroups, c)
		}
		if !all || (len(lr.cidrs)+len(lr.ipv6)+len(lr.prefixLists)+len(lr.securityGroups) == 0 && !lr.self) {
			continue
		}
		for _, c := range lr.cidrs {
			pr.cidrs = remove(pr.cidrs, c)
		}
		for _, c := range lr.ipv6 {
			pr.ipv6 = remove(pr.ipv6, c)
		}
		for _, c := range lr.prefixLists {
			pr.prefixLists = remove(pr.prefixLists, c)
		}
		for _, c := range lr.securityGroups {
			pr.securityGroups = remove(pr.securityGroups, c)
		}
		if lr.self {
			pr.self = false
		}
		out = append(out, lr.toMap())
	}
	for _, k := range order {
		r := pool[k]
		if len(r.cidrs)+len(r.ipv6)+len(r.prefixLists)+len(r.securityGroups) > 0 || r.self {
			out = append(out, r.toMap())
		}
	}
	return out
}

func (r rule) permission(groupID string) ec2types.IpPermission {
	p := ec2types.IpPermission{IpProtocol: aws.String(r.protocol), FromPort: aws.Int32(int32(r.from)), ToPort: aws.Int32(int32(r.to))}
	desc := func() *string {
		if r.description == "" {
			return nil
		}
		return aws.String(r.description)
	}
	for _, c := range r.cidrs {
		p.IpRanges = append(p.IpRanges, ec2types.IpRange{CidrIp: aws.String(c), Description: desc()})
	}
	for _, c := range r.ipv6 {
		p.Ipv6Ranges = append(p.Ipv6Ranges, ec2types.Ipv6Range{CidrIpv6: aws.String(c), Description: desc()})
	}
	for _, c := range r.prefixLists {
		p.PrefixListIds = append(p.PrefixListIds, ec2types.PrefixListId{PrefixListId: aws.String(c), Description: desc()})
	}
	for _, g := range r.securityGroups {
		p.UserIdGroupPairs = append(p.UserIdGroupPairs, ec2types.UserIdGroupPair{GroupId: aws.String(g), Description: desc()})
	}
	if r.self {
		p.UserIdGroupPairs = append(p.UserIdGroupPairs, ec2types.UserIdGroupPair{GroupId: aws.String(groupID), Description: desc()})
	}
	return p
}

func ruleID(r rule) string {
	return fmt.Sprintf("%s|%v|%v|%v|%v|%v", r.key(), r.cidrs, r.ipv6, r.prefixLists, r.securityGroups, r.self)
}

// applyRuleChanges revokes the rules in `old` that are not in `new`, then authorizes the new ones.
func applyRuleChanges(ctx context.Context, conn *ec2.Client, groupID, kind string, old, new []any) error {
	oldRules := map[string]rule{}
	for _, o := range old {
		r := ruleFromMap(o.(map[string]any))
		oldRules[ruleID(r)] = r
	}
	newRules := map[string]rule{}
	for _, n := range new {
		r := ruleFromMap(n.(map[string]any))
		newRules[ruleID(r)] = r
	}
	var revoke, authorize []ec2types.IpPermission
	for id, r := range oldRules {
		if _, keep := newRules[id]; !keep {
			revoke = append(revoke, r.permission(groupID))
		}
	}
	for id, r := range newRules {
		if _, had := oldRules[id]; !had {
			authorize = append(authorize, r.permission(groupID))
		}
	}
	if len(revoke) > 0 {
		var err error
		if kind == "ingress" {
			_, err = conn.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(groupID), IpPermissions: revoke})
		} else {
			_, err = conn.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(groupID), IpPermissions: revoke})
		}
		if err != nil && !strings.Contains(awsErrorCode(err), "NotFound") {
			return fmt.Errorf("revoking %s rules of %s: %w", kind, groupID, err)
		}
	}
	if len(authorize) > 0 {
		var err error
		if kind == "ingress" {
			_, err = conn.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(groupID), IpPermissions: authorize})
		} else {
			_, err = conn.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(groupID), IpPermissions: authorize})
		}
		if err != nil && awsErrorCode(err) != "InvalidPermission.Duplicate" {
			return fmt.Errorf("authorizing %s rules of %s: %w", kind, groupID, err)
		}
	}
	return nil
}
