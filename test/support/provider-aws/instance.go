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

// aws_instance, with the attributes a root usually sets (ami, instance_type, subnet, security
// groups, key, tags) and the ones it reads back.
func resourceInstance() *schema.Resource {
	return &schema.Resource{
		CreateContext: instanceCreate,
		ReadContext:   instanceRead,
		UpdateContext: instanceUpdate,
		DeleteContext: instanceDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		CustomizeDiff: setTagsAll,
		SchemaVersion: 1,
		Schema: map[string]*schema.Schema{
			"ami":                          {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true},
			"arn":                          {Type: schema.TypeString, Computed: true},
			"availability_zone":            {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true},
			"instance_state":               {Type: schema.TypeString, Computed: true},
			"instance_type":                {Type: schema.TypeString, Optional: true, Computed: true},
			"key_name":                     {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true},
			"primary_network_interface_id": {Type: schema.TypeString, Computed: true},
			"private_dns":                  {Type: schema.TypeString, Computed: true},
			"private_ip":                   {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true},
			"public_dns":                   {Type: schema.TypeString, Computed: true},
			"public_ip":                    {Type: schema.TypeString, Computed: true},
			"subnet_id":                    {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true},
			"tags":                         tagsSchema(),
			"tags_all":                     tagsAllSchema(),
			"vpc_security_group_ids":       {Type: schema.TypeSet, Optional: true, Computed: true, Elem: &schema.Schema{Type: schema.TypeString}, Set: schema.HashString},
		},
	}
}

func findInstance(ctx context.Context, conn *ec2.Client, id string) (*ec2types.Instance, string, error) {
	out, err := conn.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if strings.Contains(awsErrorCode(err), "NotFound") {
			return nil, "", nil
		}
		return nil, "", err
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			inst := r.Instances[i]
			if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
				return nil, "", nil
			}
			return &inst, aws.ToString(r.OwnerId), nil
		}
	}
	return nil, "", nil
}

func instanceCreate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	in := &ec2.RunInstancesInput{
		ImageId:           aws.String(d.Get("ami").(string)),
		MinCount:          aws.Int32(1),
		MaxCount:          aws.Int32(1),
		TagSpecifications: tagSpec(ec2types.ResourceTypeInstance, wantTags(d, c)),
	}
	if v, ok := d.GetOk("instance_type"); ok {
		in.InstanceType = ec2types.InstanceType(v.(string))
	}
	if v, ok := d.GetOk("subnet_id"); ok {
		in.SubnetId = aws.String(v.(string))
	}
	if v, ok := d.GetOk("key_name"); ok {
		in.KeyName = aws.String(v.(string))
	}
	if v, ok := d.GetOk("private_ip"); ok {
		in.PrivateIpAddress = aws.String(v.(string))
	}
	if v, ok := d.GetOk("availability_zone"); ok {
		in.Placement = &ec2types.Placement{AvailabilityZone: aws.String(v.(string))}
	}
	if v, ok := d.GetOk("vpc_security_group_ids"); ok {
		in.SecurityGroupIds = strList(v)
	}
	out, err := c.ec2.RunInstances(ctx, in)
	if err != nil {
		return diag.Errorf("creating EC2 Instance: %s", err)
	}
	if len(out.Instances) == 0 {
		return diag.Errorf("creating EC2 Instance: no instance in the answer")
	}
	d.SetId(aws.ToString(out.Instances[0].InstanceId))
	return instanceRead(ctx, d, meta)
}

func instanceRead(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	inst, owner, err := findInstance(ctx, c.ec2, d.Id())
	if err != nil {
		return diag.Errorf("reading EC2 Instance (%s): %s", d.Id(), err)
	}
	if inst == nil {
		d.SetId("")
		return nil
	}
	_ = d.Set("ami", inst.ImageId)
	_ = d.Set("arn", fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", c.region, owner, d.Id()))
	if inst.Placement != nil {
		_ = d.Set("availability_zone", inst.Placement.AvailabilityZone)
	}
	if inst.State != nil {
		_ = d.Set("instance_state", string(inst.State.Name))
	}
	_ = d.Set("instance_type", string(inst.InstanceType))
	_ = d.Set("key_name", inst.KeyName)
	_ = d.Set("private_dns", inst.PrivateDnsName)
	_ = d.Set("private_ip", inst.PrivateIpAddress)
	_ = d.Set("public_dns", inst.PublicDnsName)
	_ = d.Set("public_ip", inst.PublicIpAddress)
	_ = d.Set("subnet_id", inst.SubnetId)
	primary := ""
	for _, ni := range inst.NetworkInterfaces {
		if ni.Attachment != nil && aws.ToInt32(ni.Attachment.DeviceIndex) == 0 {
			primary = aws.ToString(ni.NetworkInterfaceId)
		}
	}
	_ = d.Set("primary_network_interface_id", primary)
	var groups []string
	for _, g := range inst.SecurityGroups {
		groups = append(groups, aws.ToString(g.GroupId))
	}
	_ = d.Set("vpc_security_group_ids", groups)
	if err := setTagsOut(d, c, ec2TagMap(inst.Tags)); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func instanceUpdate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	id := aws.String(d.Id())
	if d.HasChange("instance_type") {
		// As on AWS: the type of a stopped instance changes; a running one is stopped first and started after.
		if _, err := c.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{d.Id()}}); err != nil {
			return diag.Errorf("stopping EC2 Instance (%s): %s", d.Id(), err)
		}
		_, err := c.ec2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{
			InstanceId:   id,
			InstanceType: &ec2types.AttributeValue{Value: aws.String(d.Get("instance_type").(string))},
		})
		if err != nil {
			return diag.Errorf("changing type of EC2 Instance (%s): %s", d.Id(), err)
		}
		if _, err := c.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{d.Id()}}); err != nil {
			return diag.Errorf("starting EC2 Instance (%s): %s", d.Id(), err)
		}
	}
	if d.HasChange("vpc_security_group_ids") {
		_, err := c.ec2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: id, Groups: strList(d.Get("vpc_security_group_ids"))})
		if err != nil {
			return diag.Errorf("changing security groups of EC2 Instance (%s): %s", d.Id(), err)
		}
	}
	if d.HasChanges("tags", "tags_all") {
		o, _ := d.GetChange("tags_all")
		if err := updateEC2Tags(ctx, c.ec2, d.Id(), stringMap(o), wantTags(d, c)); err != nil {
			return diag.FromErr(err)
		}
	}
	return instanceRead(ctx, d, meta)
}

func instanceDelete(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	_, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{d.Id()}})
	if err != nil && !strings.Contains(awsErrorCode(err), "NotFound") {
		return diag.Errorf("terminating EC2 Instance (%s): %s", d.Id(), err)
	}
	return nil
}
