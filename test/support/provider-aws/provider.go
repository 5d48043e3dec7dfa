package main

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
)

// awsClient is what every resource gets: the three service clients and the provider's default tags.
type awsClient struct {
	ec2         *ec2.Client
	s3          *s3.Client
	iam         *iam.Client
	region      string
	defaultTags map[string]string
}

func newProvider() *schema.Provider {
	return &schema.Provider{
		Schema: map[string]*schema.Schema{
			"region":     {Type: schema.TypeString, Optional: true, Description: "AWS region; else AWS_REGION / AWS_DEFAULT_REGION."},
			"access_key": {Type: schema.TypeString, Optional: true, Sensitive: true},
			"secret_key": {Type: schema.TypeString, Optional: true, Sensitive: true},
			"token":      {Type: schema.TypeString, Optional: true, Sensitive: true},
			// Accepted as hashicorp/aws accepts them; this provider never calls STS or the metadata API.
			"skip_credentials_validation": {Type: schema.TypeBool, Optional: true},
			"skip_requesting_account_id":  {Type: schema.TypeBool, Optional: true},
			"skip_metadata_api_check":     {Type: schema.TypeString, Optional: true},
			"skip_region_validation":      {Type: schema.TypeBool, Optional: true},
			"s3_use_path_style":           {Type: schema.TypeBool, Optional: true},
			"endpoints": {
				Type:     schema.TypeSet,
				Optional: true,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"ec2": {Type: schema.TypeString, Optional: true},
					"s3":  {Type: schema.TypeString, Optional: true},
					"iam": {Type: schema.TypeString, Optional: true},
				}},
			},
			"default_tags": {
				Type:     schema.TypeList,
				Optional: true,
				MaxItems: 1,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"tags": {Type: schema.TypeMap, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
				}},
			},
		},
		ResourcesMap: map[string]*schema.Resource{
			"aws_security_group":                  resourceSecurityGroup(),
			"aws_vpc_security_group_ingress_rule": resourceIngressRule(),
			"aws_s3_bucket":                       resourceBucket(),
			"aws_s3_bucket_versioning":            resourceBucketVersioning(),
			"aws_iam_role":                        resourceIAMRole(),
			"aws_instance":                        resourceInstance(),
		},
		ConfigureContextFunc: configure,
	}
}

func configure(ctx context.Context, d *schema.ResourceData) (any, diag.Diagnostics) {
	var opts []func(*config.LoadOptions) error
	if r := d.Get("region").(string); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if ak, sk := d.Get("access_key").(string), d.Get("secret_key").(string); ak != "" && sk != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(ak, sk, d.Get("token").(string))))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, diag.Errorf("loading AWS configuration: %s", err)
	}
	if cfg.Region == "" {
		return nil, diag.Errorf("no AWS region: set the provider's region or AWS_REGION")
	}
	endpoints := map[string]string{}
	if v, ok := d.GetOk("endpoints"); ok {
		for _, e := range v.(*schema.Set).List() {
			for k, val := range e.(map[string]any) {
				if s, _ := val.(string); s != "" {
					endpoints[k] = s
				}
			}
		}
	}
	// A custom endpoint (an emulator) serves buckets by path, not by host name.
	pathStyle := d.Get("s3_use_path_style").(bool) || endpoints["s3"] != "" ||
		os.Getenv("AWS_ENDPOINT_URL") != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	c := &awsClient{
		region: cfg.Region,
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			if e := endpoints["ec2"]; e != "" {
				o.BaseEndpoint = aws.String(e)
			}
		}),
		s3: s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.UsePathStyle = pathStyle
			if e := endpoints["s3"]; e != "" {
				o.BaseEndpoint = aws.String(e)
			}
		}),
		iam: iam.NewFromConfig(cfg, func(o *iam.Options) {
			if e := endpoints["iam"]; e != "" {
				o.BaseEndpoint = aws.String(e)
			}
			o.APIOptions = append(o.APIOptions, addAttemptCounter)
		}),
		defaultTags: map[string]string{},
	}
	if v, ok := d.GetOk("default_tags"); ok {
		if l := v.([]any); len(l) > 0 && l[0] != nil {
			for k, val := range l[0].(map[string]any)["tags"].(map[string]any) {
				c.defaultTags[k] = val.(string)
			}
		}
	}
	return c, nil
}

// ---- tags and tags_all, as hashicorp/aws models them ----

func tagsSchema() *schema.Schema {
	return &schema.Schema{Type: schema.TypeMap, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}}
}

func tagsAllSchema() *schema.Schema {
	return &schema.Schema{Type: schema.TypeMap, Optional: true, Computed: true, Elem: &schema.Schema{Type: schema.TypeString}}
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(map[string]any); ok {
		for k, val := range m {
			if s, ok := val.(string); ok {
				out[k] = s
			}
		}
	}
	return out
}

// setTagsAll plans tags_all as the provider's default tags merged with the resource's tags.
func setTagsAll(_ context.Context, d *schema.ResourceDiff, meta any) error {
	c := meta.(*awsClient)
	if !d.NewValueKnown("tags") {
		return d.SetNewComputed("tags_all")
	}
	all := map[string]string{}
	for k, v := range c.defaultTags {
		all[k] = v
	}
	for k, v := range stringMap(d.Get("tags")) {
		all[k] = v
	}
	if fmt.Sprint(sortedPairs(all)) == fmt.Sprint(sortedPairs(stringMap(d.Get("tags_all")))) {
		return nil
	}
	return d.SetNew("tags_all", all)
}

func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// wantTags is what the cloud should carry: default tags merged with the resource's.
func wantTags(d *schema.ResourceData, c *awsClient) map[string]string {
	all := map[string]string{}
	for k, v := range c.defaultTags {
		all[k] = v
	}
	for k, v := range stringMap(d.Get("tags")) {
		all[k] = v
	}
	return all
}

// setTagsOut records the cloud's tags: tags_all whole, tags without the provider's default tags
// (unless the resource sets the same key itself).
func setTagsOut(d *schema.ResourceData, c *awsClient, remote map[string]string) error {
	own := stringMap(d.Get("tags"))
	tags := map[string]string{}
	for k, v := range remote {
		if dv, isDefault := c.defaultTags[k]; isDefault && dv == v {
			if _, mine := own[k]; !mine {
				continue
			}
		}
		tags[k] = v
	}
	if err := d.Set("tags", tags); err != nil {
		return err
	}
	return d.Set("tags_all", remote)
}

// tagList renders a tag map in key order as a service's tag type.
func tagList[T any](m map[string]string, mk func(k, v string) T) []T {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, mk(k, m[k]))
	}
	return out
}

// tagDiff says which keys to set and which to remove to go from `have` to `want`.
func tagDiff(have, want map[string]string) (set map[string]string, remove []string) {
	set = map[string]string{}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			set[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			remove = append(remove, k)
		}
	}
	sort.Strings(remove)
	return set, remove
}
