package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"
)

// aws_s3_bucket: the bucket, its tags and the attributes derived from its name. (The deprecated
// computed blocks of hashicorp/aws v4+ — acl, versioning, website… — are left out: roots manage
// those with their own resources, such as aws_s3_bucket_versioning.)
func resourceBucket() *schema.Resource {
	return &schema.Resource{
		CreateContext: bucketCreate,
		ReadContext:   bucketRead,
		UpdateContext: bucketUpdate,
		DeleteContext: bucketDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		CustomizeDiff: setTagsAll,
		Schema: map[string]*schema.Schema{
			"arn":                         {Type: schema.TypeString, Computed: true},
			"bucket":                      {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true, ConflictsWith: []string{"bucket_prefix"}},
			"bucket_domain_name":          {Type: schema.TypeString, Computed: true},
			"bucket_prefix":               {Type: schema.TypeString, Optional: true, Computed: true, ForceNew: true, ConflictsWith: []string{"bucket"}},
			"bucket_regional_domain_name": {Type: schema.TypeString, Computed: true},
			"force_destroy":               {Type: schema.TypeBool, Optional: true, Default: false},
			"hosted_zone_id":              {Type: schema.TypeString, Computed: true},
			"object_lock_enabled":         {Type: schema.TypeBool, Optional: true, Computed: true, ForceNew: true},
			"region":                      {Type: schema.TypeString, Computed: true},
			"tags":                        tagsSchema(),
			"tags_all":                    tagsAllSchema(),
		},
	}
}

func isNoSuch(err error) bool {
	code := awsErrorCode(err)
	var nf *s3types.NotFound
	var nb *s3types.NoSuchBucket
	return code == "NoSuchBucket" || code == "NotFound" || code == "NoSuchTagSet" || errors.As(err, &nf) || errors.As(err, &nb)
}

func bucketTags(ctx context.Context, conn *s3.Client, bucket string) (map[string]string, error) {
	out, err := conn.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(bucket)})
	if err != nil {
		if isNoSuch(err) {
			return map[string]string{}, nil
		}
		return nil, err
	}
	m := map[string]string{}
	for _, t := range out.TagSet {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m, nil
}

func putBucketTags(ctx context.Context, conn *s3.Client, bucket string, tags map[string]string) error {
	if len(tags) == 0 {
		_, err := conn.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: aws.String(bucket)})
		return err
	}
	set := tagList(tags, func(k, v string) s3types.Tag { return s3types.Tag{Key: aws.String(k), Value: aws.String(v)} })
	_, err := conn.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(bucket), Tagging: &s3types.Tagging{TagSet: set}})
	return err
}

func bucketCreate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	name := d.Get("bucket").(string)
	if name == "" {
		prefix := d.Get("bucket_prefix").(string)
		if prefix == "" {
			prefix = "terraform-"
		}
		name = prefix + uniqueSuffix()
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if c.region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(c.region)}
	}
	if d.Get("object_lock_enabled").(bool) {
		in.ObjectLockEnabledForBucket = aws.Bool(true)
	}
	if _, err := c.s3.CreateBucket(ctx, in); err != nil {
		return diag.Errorf("creating S3 Bucket (%s): %s", name, err)
	}
	d.SetId(name)
	if tags := wantTags(d, c); len(tags) > 0 {
		if err := putBucketTags(ctx, c.s3, name, tags); err != nil {
			return diag.Errorf("tagging S3 Bucket (%s): %s", name, err)
		}
	}
	return bucketRead(ctx, d, meta)
}

func bucketRead(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	if _, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(d.Id())}); err != nil {
		if isNoSuch(err) {
			d.SetId("")
			return nil
		}
		return diag.Errorf("reading S3 Bucket (%s): %s", d.Id(), err)
	}
	_ = d.Set("bucket", d.Id())
	_ = d.Set("bucket_prefix", "")
	_ = d.Set("arn", "arn:aws:s3:::"+d.Id())
	_ = d.Set("bucket_domain_name", d.Id()+".s3.amazonaws.com")
	_ = d.Set("bucket_regional_domain_name", fmt.Sprintf("%s.s3.%s.amazonaws.com", d.Id(), c.region))
	_ = d.Set("hosted_zone_id", "Z3AQBSTGFYJSTF")
	_ = d.Set("region", c.region)
	lock, err := c.s3.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(d.Id())})
	_ = d.Set("object_lock_enabled", err == nil && lock.ObjectLockConfiguration != nil && lock.ObjectLockConfiguration.ObjectLockEnabled == s3types.ObjectLockEnabledEnabled)
	tags, err := bucketTags(ctx, c.s3, d.Id())
	if err != nil {
		return diag.Errorf("reading tags of S3 Bucket (%s): %s", d.Id(), err)
	}
	if err := setTagsOut(d, c, tags); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func bucketUpdate(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	if d.HasChanges("tags", "tags_all") {
		if err := putBucketTags(ctx, c.s3, d.Id(), wantTags(d, c)); err != nil {
			return diag.Errorf("tagging S3 Bucket (%s): %s", d.Id(), err)
		}
	}
	return bucketRead(ctx, d, meta)
}

func bucketDelete(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	if d.Get("force_destroy").(bool) {
		versions, err := c.s3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(d.Id())})
		if err == nil {
			for _, v := range versions.Versions {
				_, _ = c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.Id()), Key: v.Key, VersionId: v.VersionId})
			}
			for _, m := range versions.DeleteMarkers {
				_, _ = c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.Id()), Key: m.Key, VersionId: m.VersionId})
			}
		}
	}
	if _, err := c.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(d.Id())}); err != nil && !isNoSuch(err) {
		return diag.Errorf("deleting S3 Bucket (%s): %s", d.Id(), err)
	}
	return nil
}

// aws_s3_bucket_versioning: the bucket's versioning state as its own resource.
func resourceBucketVersioning() *schema.Resource {
	return &schema.Resource{
		CreateContext: versioningPut,
		ReadContext:   versioningRead,
		UpdateContext: versioningPut,
		DeleteContext: versioningDelete,
		Importer:      &schema.ResourceImporter{StateContext: schema.ImportStatePassthroughContext},
		Schema: map[string]*schema.Schema{
			"bucket":                {Type: schema.TypeString, Required: true, ForceNew: true},
			"expected_bucket_owner": {Type: schema.TypeString, Optional: true, ForceNew: true},
			"mfa":                   {Type: schema.TypeString, Optional: true},
			"versioning_configuration": {
				Type:     schema.TypeList,
				Required: true,
				MaxItems: 1,
				Elem: &schema.Resource{Schema: map[string]*schema.Schema{
					"mfa_delete": {Type: schema.TypeString, Optional: true, Computed: true},
					"status":     {Type: schema.TypeString, Required: true},
				}},
			},
		},
	}
}

func versioningConfig(d *schema.ResourceData) (status, mfaDelete string) {
	l := d.Get("versioning_configuration").([]any)
	if len(l) == 0 || l[0] == nil {
		return "", ""
	}
	m := l[0].(map[string]any)
	return m["status"].(string), m["mfa_delete"].(string)
}

func versioningPut(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	bucket := d.Get("bucket").(string)
	status, mfaDelete := versioningConfig(d)
	if status == "Disabled" {
		if d.IsNewResource() {
			d.SetId(bucket)
			return versioningRead(ctx, d, meta)
		}
		return diag.Errorf("versioning of S3 Bucket (%s) cannot go back to Disabled once enabled; use Suspended", bucket)
	}
	cfg := &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatus(status)}
	if mfaDelete != "" {
		cfg.MFADelete = s3types.MFADelete(mfaDelete)
	}
	if _, err := c.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket), VersioningConfiguration: cfg}); err != nil {
		return diag.Errorf("setting versioning of S3 Bucket (%s): %s", bucket, err)
	}
	d.SetId(bucket)
	return versioningRead(ctx, d, meta)
}

func versioningRead(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	out, err := c.s3.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(d.Id())})
	if err != nil {
		if isNoSuch(err) {
			d.SetId("")
			return nil
		}
		return diag.Errorf("reading versioning of S3 Bucket (%s): %s", d.Id(), err)
	}
	status := string(out.Status)
	if status == "" {
		status = "Disabled"
	}
	_ = d.Set("bucket", d.Id())
	cfg := map[string]any{"status": status, "mfa_delete": string(out.MFADelete)}
	if err := d.Set("versioning_configuration", []any{cfg}); err != nil {
		return diag.FromErr(err)
	}
	return nil
}

func versioningDelete(ctx context.Context, d *schema.ResourceData, meta any) diag.Diagnostics {
	c := meta.(*awsClient)
	status, _ := versioningConfig(d)
	if status == "Disabled" {
		return nil
	}
	_, err := c.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(d.Id()),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusSuspended},
	})
	if err != nil && !isNoSuch(err) {
		return diag.Errorf("suspending versioning of S3 Bucket (%s): %s", d.Id(), err)
	}
	return nil
}
