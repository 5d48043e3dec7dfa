package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
)

// aws_vpc_security_group_ingress_rule: one rule of a group, managed on its own; changed in place
// with ModifySecurityGroupRules, as hashicorp/aws does.
func resourceIngressRule() *schema.Resource {
	return &schema.Resource{
		CreateContext: ingressRuleCreate,
		ReadContext:   ingressRuleRead,
		UpdateContext: ingressRuleUpdate,
		DeleteContext: ingressRuleDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		CustomizeDiff: setTagsAll,
		Schema: map[string]*schema.Schema{
			"arn":                          {Type: schema.TypeString, Computed: true},
			"cidr_ipv4":                    {Type: schema.TypeString, Optional: true},
			"cidr_ipv6":                    {Type: schema.TypeString, Optional: true},
			"description":                  {Type: schema.TypeString, Optional: true},
			"from_port":                    {Type: schema.TypeInt, Optional: true},
			"ip_protocol":                  {Type: schema.TypeString, Required: true, StateFunc: func(v any) string { return normalizeProtocol(v.(string)) }},
			"prefix_list_id":               {Type: schema.TypeString, Optional: true},
			"referenced_security_group_id": {Type: schema.TypeString, Optional: true},
			"security_group_id":            {Type: schema.TypeString, Required: true, ForceNew: true},
			"security_group_rule_id":       {Type: schema.TypeString, Computed: true},
			"tags":                         tagsSchema(),
			"tags_all":                     tagsAllSchema(),
			"to_port":                      {Type: schema.TypeInt, Optional: true},
		},
	}
}

func ingressRulePermission(d *schema.ResourceData) ec2types.IpPermission {
	p := ec2types.IpPermission{IpProtocol: aws.String(normalizeProtocol(d.Get("ip_protocol").(string)))}
	if p.IpProtocol != nil && *p.IpProtocol != "-1" {
		p.FromPort = aws.Int32(int32(d.Get("from_port").(int)))
		p.ToPort = aws.Int32(int32(d.Get("to_port").(int)))
	}
	var desc *string
	if s := d.Get("description").(string); s != "" {
		desc = aws.String(s)
	}
	if v := d.Get("cidr_ipv4").(string); v != "" {
		p.IpRanges = []ec2types.IpRange{{CidrIp: aws.String(v), Description: desc}}
	}
	if v := d.Get("cidr_ipv6").(string); v != "" {
		p.Ipv6Ranges = []ec2types.Ipv6Range{{CidrIpv6: aws.String(v), Description: desc}}
	}
	if v := d.Get("prefix_list_id").(string); v != "" {
		p.PrefixListIds = []ec2types.PrefixListId{{PrefixListId: aws.String(v), Description: desc}}
	}
	if v := d.Get("referenced_security_group_id").(string); v != "" {
		p.UserIdGroupPairs = []ec2types.UserIdGroupPair{{GroupId: aws.String(v), Description: desc}}
	}
	return p
}

func ingressRuleCreate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	out, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
		GroupId:           aws.String(d.Get("security_group_id").(string)),
		IpPermissions:     []ec2types.IpPermission{ingressRulePermission(d)},
		TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroupRule, wantTags(d, c)),
	})
	if err != nil {
		return diag.Errorf("authorizing security group ingress rule: %s", err)
	}
	if len(out.SecurityGroupRules) == 0 {
		return diag.Errorf("authorizing security group ingress rule: no rule id in the answer")
	}
	d.SetId(aws.ToString(out.SecurityGroupRules[0].SecurityGroupRuleId))
	return ingressRuleRead(ctx, d, meta)
}

func ingressRuleRead(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	out, err := c.ec2.DescribeSecurityGroupRules(ctx, &ec2.DescribeSecurityGroupRulesInput{SecurityGroupRuleIds: []string{d.Id()}})
	if err != nil && !strings.Contains(awsErrorCode(err), "NotFound") {
		return diag.Errorf("reading security group rule (%s): %s", d.Id(), err)
	}
	if err != nil || len(out.SecurityGroupRules) == 0 {
		d.SetId("")
		return nil
	}
	r := out.SecurityGroupRules[0]
	_ = d.Set("arn", fmt.Sprintf("arn:aws:ec2:%s:%s:security-group-rule/%s", c.region, aws.ToString(r.GroupOwnerId), d.Id()))
	_ = d.Set("security_group_rule_id", d.Id())
	_ = d.Set("security_group_id", r.GroupId)
	_ = d.Set("ip_protocol", normalizeProtocol(aws.ToString(r.IpProtocol)))
	if normalizeProtocol(aws.ToString(r.IpProtocol)) != "-1" {
		_ = d.Set("from_port", int(aws.ToInt32(r.FromPort)))
		_ = d.Set("to_port", int(aws.ToInt32(r.ToPort)))
	}
	_ = d.Set("cidr_ipv4", aws.ToString(r.CidrIpv4))
	_ = d.Set("cidr_ipv6", aws.ToString(r.CidrIpv6))
	_ = d.Set("prefix_list_id", aws.ToString(r.PrefixListId))
	if r.ReferencedGroupInfo != nil {
		_ = d.Set("referenced_security_group_id", aws.ToString(r.ReferencedGroupInfo.GroupId))
	}
	_ = d.Set("description", aws.ToString(r.Description))
	if err := setTagsOut(d, c, ec2TagMap(r.Tags)); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func ingressRuleUpdate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	if d.HasChanges("cidr_ipv4", "cidr_ipv6", "description", "from_port", "ip_protocol", "prefix_list_id", "referenced_security_group_id", "to_port") {
		req := &ec2types.SecurityGroupRuleRequest{IpProtocol: aws.String(normalizeProtocol(d.Get("ip_protocol").(string)))}
		if *req.IpProtocol != "-1" {
			req.FromPort = aws.Int32(int32(d.Get("from_port").(int)))
			req.ToPort = aws.Int32(int32(d.Get("to_port").(int)))
		}
		opt := func(k string) *string {
			if v := d.Get(k).(string); v != "" {
				return aws.String(v)
			}
			return nil
		}
		req.CidrIpv4, req.CidrIpv6, req.PrefixListId, req.ReferencedGroupId, req.Description =
			opt("cidr_ipv4"), opt("cidr_ipv6"), opt("prefix_list_id"), opt("referenced_security_group_id"), opt("description")
		_, err := c.ec2.ModifySecurityGroupRules(ctx, &ec2.ModifySecurityGroupRulesInput{
			GroupId:            aws.String(d.Get("security_group_id").(string)),
			SecurityGroupRules: []ec2types.SecurityGroupRuleUpdate{{SecurityGroupRuleId: aws.String(d.Id()), SecurityGroupRule: req}},
		})
		if err != nil {
			return diag.Errorf("modifying security group rule (%s): %s", d.Id(), err)
		}
	}
	if d.HasChanges("tags", "tags_all") {
		o, _ := d.GetChange("tags_all")
		if err := updateEC2Tags(ctx, c.ec2, d.Id(), stringMap(o), wantTags(d, c)); err != nil {
			return diag.FromErr(err)
		}
	}
	return ingressRuleRead(ctx, d, meta)
}

func ingressRuleDelete(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	_, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{
		GroupId:              aws.String(d.Get("security_group_id").(string)),
		SecurityGroupRuleIds: []string{d.Id()},
	})
	if err != nil && !strings.Contains(awsErrorCode(err), "NotFound") {
		return diag.Errorf("revoking security group rule (%s): %s", d.Id(), err)
	}
	return nil
}
