package main

import (
	"context"
	"fmt"

	"github.com/mcphandler/mcphandler"
)

// The concrete resources. test://watched-resource is the one the suite
// subscribes to; the handler records subscriptions in the session.
var resources = []mcphandler.Resource{
	{URI: "test://static-text", Name: "static-text", Description: "A static text resource.", MimeType: "text/plain"},
	{URI: "test://static-binary", Name: "static-binary", Description: "A static 1×1 PNG image.", MimeType: "image/png"},
	{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource clients may subscribe to.", MimeType: "text/plain"},
}

var templates = []mcphandler.ResourceTemplate{
	{URITemplate: "test://template/{id}/data", Name: "template-data", Description: "JSON data for any id.", MimeType: "application/json"},
}

func listResources(context.Context) ([]mcphandler.Resource, error) { return resources, nil }

func listResourceTemplates(context.Context) ([]mcphandler.ResourceTemplate, error) {
	return templates, nil
}

// readResource is only called for a URI listed above or matching the
// template: the handler answers "resource not found" for anything else.
func readResource(_ context.Context, req *mcphandler.ResourceRequest) ([]mcphandler.ResourceContents, error) {
	c := mcphandler.ResourceContents{URI: req.URI}
	switch req.URI {
	case "test://static-text":
		c.MimeType, c.Text = "text/plain", "This is the content of the static text resource."
	case "test://static-binary":
		c.MimeType, c.Blob = "image/png", redPixelPNG
	case "test://watched-resource":
		c.MimeType, c.Text = "text/plain", "Watched resource content"
	default: // test://template/{id}/data
		c.MimeType = "application/json"
		c.Text = fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, req.Params["id"], req.Params["id"])
	}
	return []mcphandler.ResourceContents{c}, nil
}
