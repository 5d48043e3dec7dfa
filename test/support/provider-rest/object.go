package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type objectResource struct{ client *apiClient }

type objectModel struct {
	ID   types.String `tfsdk:"id"`
	Path types.String `tfsdk:"path"`
	Data types.String `tfsdk:"data"`
}

func newObjectResource() resource.Resource { return &objectResource{} }

func (r *objectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_object"
}

func (r *objectResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A JSON object stored at <path>/<id>; the id is the object's \"id\" field.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"path": schema.StringAttribute{
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"data": schema.StringAttribute{Required: true, Description: "The object as JSON; must carry an \"id\"."},
		},
	}
}

func (r *objectResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	client, ok := req.ProviderData.(*apiClient)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("got %T", req.ProviderData))
		return
	}
	r.client = client
}

func objectID(data string) (string, error) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(data), &obj); err != nil {
		return "", fmt.Errorf("data is not a JSON object: %w", err)
	}
	id, ok := obj["id"]
	if !ok {
		return "", fmt.Errorf("data has no \"id\" field")
	}
	return fmt.Sprint(id), nil
}

func (c *apiClient) do(ctx context.Context, method, p string, body string) (int, []byte, error) {
	var reader io.Reader
	if body != "" {
		reader = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, reader)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

func objectPath(base, id string) string {
	return strings.TrimRight(base, "/") + "/" + url.PathEscape(id)
}

// sameJSON reports whether two JSON texts hold the same value, whatever their formatting.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func (r *objectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, err := objectID(plan.Data.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("data"), "Invalid object", err.Error())
		return
	}
	status, body, err := r.client.do(ctx, http.MethodPost, plan.Path.ValueString(), plan.Data.ValueString())
	if err != nil || status >= 300 {
		resp.Diagnostics.AddError("Cannot create object", fmt.Sprintf("POST %s: status %d %s %v", plan.Path.ValueString(), status, body, err))
		return
	}
	plan.ID = types.StringValue(id)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *objectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	status, body, err := r.client.do(ctx, http.MethodGet, objectPath(state.Path.ValueString(), state.ID.ValueString()), "")
	if err != nil {
		resp.Diagnostics.AddError("Cannot read object", err.Error())
		return
	}
	if status == http.StatusNotFound {
		resp.State.RemoveResource(ctx)
		return
	}
	if status >= 300 {
		resp.Diagnostics.AddError("Cannot read object", fmt.Sprintf("status %d: %s", status, body))
		return
	}
	// Keep the state's text when the server holds the same value (no spurious diff); otherwise
	// record what the server holds now: that difference is the drift.
	if !sameJSON(string(body), state.Data.ValueString()) {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			resp.Diagnostics.AddError("Server returned invalid JSON", err.Error())
			return
		}
		canonical, _ := json.Marshal(v)
		state.Data = types.StringValue(string(canonical))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *objectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state objectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, err := objectID(plan.Data.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("data"), "Invalid object", err.Error())
		return
	}
	if id != state.ID.ValueString() {
		resp.Diagnostics.AddAttributeError(path.Root("data"), "Invalid object", "the \"id\" field cannot change")
		return
	}
	status, body, err := r.client.do(ctx, http.MethodPut, objectPath(plan.Path.ValueString(), id), plan.Data.ValueString())
	if err != nil || status >= 300 {
		resp.Diagnostics.AddError("Cannot update object", fmt.Sprintf("status %d %s %v", status, body, err))
		return
	}
	plan.ID = types.StringValue(id)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *objectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state objectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	status, body, err := r.client.do(ctx, http.MethodDelete, objectPath(state.Path.ValueString(), state.ID.ValueString()), "")
	if err != nil || (status >= 300 && status != http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot delete object", fmt.Sprintf("status %d %s %v", status, body, err))
	}
}

func (r *objectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	// Import id: <path>/<id>, e.g. /api/objects/sg-web-demo
	i := strings.LastIndex(req.ID, "/")
	if i <= 0 {
		resp.Diagnostics.AddError("Invalid import id", "expected <path>/<id>")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("path"), req.ID[:i])...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID[i+1:])...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("data"), "{}")...)
}
