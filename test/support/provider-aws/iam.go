package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
)

func uniqueSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102150405") + hex.EncodeToString(b)[:10]
}

// equivalentJSON says whether two policy documents mean the same (whitespace and key order aside),
// as hashicorp/aws suppresses the diff of equivalent policies.
func equivalentJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}

func resourceIAMRole() *schema.Resource {
	return &schema.Resource{
		CreateContext: roleCreate,
		ReadContext:   roleRead,
		UpdateContext: roleUpdate,
		DeleteContext: roleDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		CustomizeDiff: setTagsAll,
		Schema: map[string]*schema.Schema{
			"arn": {Type: schema.TypeString, Computed: true},
			"assume_role_policy": {
				Type:             schema.TypeString,
				Required:         true,
				DiffSuppressFunc: func(_, o, n string, _ *schema.ResourceData) bool { return equivalentJSON(o, n) },
			},
			"create_date":           {Type: schema.TypeString, Computed: true},
			"description":           {Type: schema.TypeString, Optional: true},
			"force_detach_policies": {Type: schema.TypeBool, Optional: true, Default: false},
			"max_session_duration":  {Type: schema.TypeInt, Optional: true, Default: 3600},
			"name":                  {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true, ConflictsWith: []string{"name_prefix"}},
			"name_prefix":           {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true, ConflictsWith: []string{"name"}},
			"path":                  {Type: schema.TypeString, Optional: true, Default: "/", ForceNew: true},
			"permissions_boundary":  {Type: schema.TypeString, Optional: true},
			"tags":                  tagsSchema(),
			"tags_all":              tagsAllSchema(),
			"unique_id":             {Type: schema.TypeString, Computed: true},
		},
	}
}

func iamTags(m map[string]string) []iamtypes.Tag {
	return tagList(m, func(k, v string) iamtypes.Tag { return iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)} })
}

func roleCreate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	name := d.Get("name").(string)
	if name == "" {
		prefix := d.Get("name_prefix").(string)
		if prefix == "" {
			prefix = "terraform-"
		}
		name = prefix + uniqueSuffix()
	}
	in := &iam.CreateRoleInput{
		RoleName:                 aws.String(name),
		AssumeRolePolicyDocument: aws.String(d.Get("assume_role_policy").(string)),
		Path:                     aws.String(d.Get("path").(string)),
		MaxSessionDuration:       aws.Int32(int32(d.Get("max_session_duration").(int))),
	}
	if v := d.Get("description").(string); v != "" {
		in.Description = aws.String(v)
	}
	if v := d.Get("permissions_boundary").(string); v != "" {
		in.PermissionsBoundary = aws.String(v)
	}
	if tags := wantTags(d, c); len(tags) > 0 {
		in.Tags = iamTags(tags)
	}
	attemptCtx, attempts := withAttempts(ctx)
	if _, err := c.iam.CreateRole(attemptCtx, in); err != nil {
		// Sent more than once and the name taken: the first attempt created it (see attempts.go).
		if !(awsErrorCode(err) == "EntityAlreadyExists" && attempts.Load() > 1) {
			return diag.Errorf("creating IAM Role (%s): %s", name, err)
		}
	}
	d.SetId(name)
	return roleRead(ctx, d, meta)
}

func roleRead(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	out, err := c.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(d.Id())})
	if err != nil {
		if awsErrorCode(err) == "NoSuchEntity" {
			d.SetId("")
			return nil
		}
		return diag.Errorf("reading IAM Role (%s): %s", d.Id(), err)
	}
	r := out.Role
	_ = d.Set("arn", r.Arn)
	_ = d.Set("name", r.RoleName)
	_ = d.Set("name_prefix", "")
	_ = d.Set("path", r.Path)
	_ = d.Set("unique_id", r.RoleId)
	_ = d.Set("description", aws.ToString(r.Description))
	_ = d.Set("max_session_duration", int(aws.ToInt32(r.MaxSessionDuration)))
	if r.CreateDate != nil {
		_ = d.Set("create_date", r.CreateDate.UTC().Format(time.RFC3339))
	}
	if r.PermissionsBoundary != nil {
		_ = d.Set("permissions_boundary", aws.ToString(r.PermissionsBoundary.PermissionsBoundaryArn))
	} else {
		_ = d.Set("permissions_boundary", "")
	}
	// IAM answers the document URL-encoded; keep the recorded text when it means the same.
	doc, err := url.QueryUnescape(aws.ToString(r.AssumeRolePolicyDocument))
	if err != nil {
		doc = aws.ToString(r.AssumeRolePolicyDocument)
	}
	if prev := d.Get("assume_role_policy").(string); prev != "" && equivalentJSON(prev, doc) {
		doc = prev
	}
	_ = d.Set("assume_role_policy", doc)
	tags := map[string]string{}
	for _, t := range r.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if err := setTagsOut(d, c, tags); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func roleUpdate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	name := aws.String(d.Id())
	if d.HasChange("assume_role_policy") {
		if _, err := c.iam.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: name, PolicyDocument: aws.String(d.Get("assume_role_policy").(string))}); err != nil {
			return diag.Errorf("updating assume role policy of IAM Role (%s): %s", d.Id(), err)
		}
	}
	if d.HasChanges("description", "max_session_duration") {
		in := &iam.UpdateRoleInput{RoleName: name, Description: aws.String(d.Get("description").(string)), MaxSessionDuration: aws.Int32(int32(d.Get("max_session_duration").(int)))}
		if _, err := c.iam.UpdateRole(ctx, in); err != nil {
			return diag.Errorf("updating IAM Role (%s): %s", d.Id(), err)
		}
	}
	if d.HasChange("permissions_boundary") {
		var err error
		if v := d.Get("permissions_boundary").(string); v != "" {
			_, err = c.iam.PutRolePermissionsBoundary(ctx, &iam.PutRolePermissionsBoundaryInput{RoleName: name, PermissionsBoundary: aws.String(v)})
		} else {
			_, err = c.iam.DeleteRolePermissionsBoundary(ctx, &iam.DeleteRolePermissionsBoundaryInput{RoleName: name})
		}
		if err != nil {
			return diag.Errorf("updating permissions boundary of IAM Role (%s): %s", d.Id(), err)
		}
	}
	if d.HasChanges("tags", "tags_all") {
		o, _ := d.GetChange("tags_all")
		set, remove := tagDiff(stringMap(o), wantTags(d, c))
		if len(remove) > 0 {
			if _, err := c.iam.UntagRole(ctx, &iam.UntagRoleInput{RoleName: name, TagKeys: remove}); err != nil {
				return diag.Errorf("untagging IAM Role (%s): %s", d.Id(), err)
			}
		}
		if len(set) > 0 {
			if _, err := c.iam.TagRole(ctx, &iam.TagRoleInput{RoleName: name, Tags: iamTags(set)}); err != nil {
				return diag.Errorf("tagging IAM Role (%s): %s", d.Id(), err)
			}
		}
	}
	return roleRead(ctx, d, meta)
}

func roleDelete(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	name := aws.String(d.Id())
	if d.Get("force_detach_policies").(bool) {
		if out, err := c.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: name}); err == nil {
			for _, p := range out.AttachedPolicies {
				_, _ = c.iam.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: name, PolicyArn: p.PolicyArn})
			}
		}
		if out, err := c.iam.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: name}); err == nil {
			for _, p := range out.PolicyNames {
				_, _ = c.iam.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: name, PolicyName: aws.String(p)})
			}
		}
	}
	if _, err := c.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: name}); err != nil && awsErrorCode(err) != "NoSuchEntity" {
		return diag.Errorf("deleting IAM Role (%s): %s", d.Id(), err)
	}
	return nil
}
