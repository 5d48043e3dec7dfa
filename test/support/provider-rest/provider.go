package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type restProvider struct{}

type apiClient struct {
	base string
	http *http.Client
}

func newProvider() provider.Provider { return &restProvider{} }

func (p *restProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "rest"
	resp.Version = version
}

func (p *restProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "JSON objects on a REST server.",
		Attributes: map[string]schema.Attribute{
			"uri": schema.StringAttribute{Required: true, Description: "Base URL of the REST server."},
		},
	}
}

func (p *restProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg struct {
		URI types.String `tfsdk:"uri"`
	}
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	client := &apiClient{base: strings.TrimRight(cfg.URI.ValueString(), "/"), http: &http.Client{Timeout: 30 * time.Second}}
	resp.ResourceData = client
}

func (p *restProvider) Resources(_ context.Context) []func() resource.Resource {
	return []func() resource.Resource{newObjectResource}
}

func (p *restProvider) DataSources(_ context.Context) []func() datasource.DataSource { return nil }
