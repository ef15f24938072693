package main

import (
	"context"
	"strings"

	"github.com/mcphandler/mcphandler"
)

// Every prompt has a description: prompts-list checks it.
var prompts = []mcphandler.Prompt{
	{Name: "test_simple_prompt", Description: "A prompt without arguments."},
	{Name: "test_prompt_with_arguments", Description: "A prompt that uses its two arguments.",
		Arguments: []mcphandler.PromptArgument{
			{Name: "arg1", Description: "First argument", Required: true},
			{Name: "arg2", Description: "Second argument", Required: true},
		}},
	{Name: "test_prompt_with_embedded_resource", Description: "A prompt that embeds the resource it is given.",
		Arguments: []mcphandler.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		}},
	{Name: "test_prompt_with_image", Description: "A prompt with an image."},
	inputRequiredPrompt,
}

func listPrompts(context.Context) ([]mcphandler.Prompt, error) { return prompts, nil }

// getPrompt is only called for a listed prompt with its required arguments.
func getPrompt(ctx context.Context, req *mcphandler.PromptRequest) (*mcphandler.PromptResult, error) {
	user := func(c mcphandler.Content) mcphandler.PromptMessage {
		return mcphandler.PromptMessage{Role: "user", Content: c}
	}
	if req.Prompt.Name == inputRequiredPrompt.Name {
		return getInputRequiredPrompt(ctx, req)
	}
	var msgs []mcphandler.PromptMessage
	switch args := req.Arguments; req.Prompt.Name {
	case "test_simple_prompt":
		msgs = append(msgs, user(mcphandler.TextContent("This is a simple prompt for testing.")))
	case "test_prompt_with_arguments":
		msgs = append(msgs, user(mcphandler.TextContent(
			"Prompt with arguments: arg1='"+args["arg1"]+"', arg2='"+args["arg2"]+"'")))
	case "test_prompt_with_embedded_resource":
		msgs = append(msgs,
			user(mcphandler.EmbeddedResourceContent(mcphandler.ResourceContents{
				URI: args["resourceUri"], MimeType: "text/plain", Text: "Embedded resource content for testing.",
			})),
			user(mcphandler.TextContent("Please process the embedded resource above.")))
	case "test_prompt_with_image":
		msgs = append(msgs,
			user(mcphandler.ImageContent(redPixelPNG, "image/png")),
			user(mcphandler.TextContent("Please analyze the image above.")))
	}
	return &mcphandler.PromptResult{Messages: msgs}, nil
}

// complete suggests values for arg1 of test_prompt_with_arguments; the
// handler has already checked that the prompt exists.
func complete(_ context.Context, req *mcphandler.CompleteRequest) (*mcphandler.CompleteResult, error) {
	res := &mcphandler.CompleteResult{}
	if req.Prompt == nil || req.Prompt.Name != "test_prompt_with_arguments" || req.Argument != "arg1" {
		return res, nil
	}
	for _, v := range []string{"paris", "park", "party", "test", "testing", "tested"} {
		if strings.HasPrefix(v, req.Value) {
			res.Values = append(res.Values, v)
		}
	}
	res.Total = len(res.Values)
	return res, nil
}
