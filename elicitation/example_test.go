package elicitation_test

import (
	"encoding/json"
	"fmt"

	"github.com/mcphandler/mcphandler/elicitation"
)

func Example() {
	s := elicitation.NewSchema().
		String("name", elicitation.Title("Name"), elicitation.Required(), elicitation.MinLength(1), elicitation.Default("John Doe")).
		Integer("age", elicitation.Title("Age"), elicitation.Minimum(0), elicitation.Default(30)).
		Enum("status", []string{"active", "inactive"}, elicitation.Default("active"))
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))

	res, err := elicitation.ParseResult([]byte(`{"action":"accept","content":{"name":"Ada","age":36.5}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Validate(res.Content))
	// Output:
	// {"type":"object","properties":{"name":{"type":"string","title":"Name","minLength":1,"default":"John Doe"},"age":{"type":"integer","title":"Age","minimum":0,"default":30},"status":{"type":"string","enum":["active","inactive"],"default":"active"}},"required":["name"]}
	// elicitation: field "age": must be an integer
}

func ExampleResult_Confirmed() {
	s := elicitation.Confirm("confirm", "Delete all files?")
	res, _ := elicitation.ParseResult([]byte(`{"action":"accept","content":{"confirm":true}}`))
	fmt.Println(res.Confirmed(s, "confirm", true))
	res, _ = elicitation.ParseResult([]byte(`{"action":"decline"}`))
	fmt.Println(res.Confirmed(s, "confirm", true))
	// Output:
	// true
	// false
}
