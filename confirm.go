package mcphandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/elicitation"
	"github.com/mcphandler/mcphandler/internal/canon"
)

// confirmField is the boolean the human ticks in the default confirm form.
const confirmField = "confirm"

// confirmPrefix marks the request ids of confirm elicitations, whose
// answers are claimed atomically in the store.
const confirmPrefix = "mcphc-"

func isConfirmID(id string) bool { return strings.HasPrefix(id, confirmPrefix) && len(id) <= 64 }

func argsDigest(args []byte) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// ConfirmDestructive returns a BeforeCall policy that asks a human to
// confirm every destructive tool and defers everything else to next
// (Allow when nil). A Deny or Confirm from next wins over the policy's own
// confirm. Its confirm carries the default message (see [Confirm]).
//
// Which tools count as destructive is [Tool.Destructive], by the spec's
// defaults: every tool unless its Annotations set ReadOnlyHint, or set
// DestructiveHint to false. A tool without Annotations is destructive and
// is confirmed: mark the tools that only read
// (&ToolAnnotations{ReadOnlyHint: true}), and those that only add
// (DestructiveHint false), to run them without a confirm.
func ConfirmDestructive(next BeforeCallFunc) BeforeCallFunc {
	return func(ctx context.Context, call *ToolCall) (Decision, error) {
		d := Allow()
		if next != nil {
			var err error
			if d, err = next(ctx, call); err != nil {
				return d, err
			}
		}
		if d.Kind == DecisionAllow && call.Tool.Destructive() {
			// The default message (confirmMessage), rendered when the
			// confirm is asked from the arguments that will run.
			return Confirm(""), nil
		}
		return d, nil
	}
}

// toolCtx is ctx carrying id for the hooks (IdentityFrom), unless it
// already carries a request.
func toolCtx(ctx context.Context, id Identity) context.Context {
	if info, ok := ctx.Value(ctxKey{}).(*reqInfo); ok && info != nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, &reqInfo{identity: id})
}

// confirmQuestion is what a confirm asks: the decision's form and expected
// values (by default a required "confirm" box that must be ticked), and
// its message: the decision's, made safe to show, or by default the tool
// and every one of its arguments (confirmMessage). It fails when the
// arguments cannot be shown in full within the message's budget.
func confirmQuestion(call *ToolCall, d Decision) (*elicitation.Schema, map[string]any, string, error) {
	form, expect := d.Form, d.Expect
	if form == nil {
		form, expect = elicitation.Confirm(confirmField, "Confirm"), map[string]any{confirmField: true}
	}
	if d.Message != "" {
		return form, expect, safeText(d.Message, 1000), nil
	}
	msg, err := confirmMessage(call)
	return form, expect, msg, err
}

// errTooLongToConfirm is the result of a call whose arguments are too
// large to show a human in full: rather than hide part of what would
// run, it does not run.
func errTooLongToConfirm(call *ToolCall) *ToolResult {
	return ErrorResult("Not run: the arguments of " + call.Tool.Name + " are too large to show for a confirmation.")
}

// decide turns the human's answer into an outcome; result is nil when the
// tool may run (accepted, every expected value present).
func decide(res elicitation.Result, form *elicitation.Schema, expect map[string]any, tool string) (Outcome, *ToolResult) {
	switch res.Action {
	case elicitation.Accept:
		for field, want := range expect {
			if !res.Confirmed(form, field, want) {
				return OutcomeDeclined, ErrorResult("Not run: the user did not confirm " + tool + ".")
			}
		}
		return OutcomeConfirmed, nil
	case elicitation.Decline:
		return OutcomeDeclined, ErrorResult("Not run: the user declined " + tool + ".")
	default:
		return OutcomeCancelled, ErrorResult("Not run: the user dismissed the confirmation of " + tool + ".")
	}
}

// confirmMessage describes the call for a human: the tool and every
// argument it will run with, rendered from the canonical arguments by
// canon.Describe — every key shown, a long value elided inside itself with
// a visible marker, invisible and reordering characters escaped, never
// dropped. It fails (canon.ErrTooLong) when that cannot fit
// canon.DefaultBudget runes.
func confirmMessage(call *ToolCall) (string, error) {
	name := call.Tool.Title
	if name == "" {
		name = call.Tool.Name
	}
	args, err := canon.Describe(call.Arguments, canon.DescribeOptions{})
	if err != nil {
		return "", err
	}
	return "Allow " + safeText(name, 80) + " to run with " + args + "?", nil
}

// safeText drops control and format characters and bounds s to max runes.
func safeText(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if n == max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// fallbackResult is what a call that needs a confirm gets when the client
// cannot be asked.
func fallbackResult(call *ToolCall, d Decision) *ToolResult {
	if d.Fallback != nil {
		return d.Fallback
	}
	return ErrorResult("Not run: " + call.Tool.Name + " needs a human confirmation, and this client cannot ask for one.")
}
