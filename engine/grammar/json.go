package grammar

import "sync"

// JSONText is a GBNF grammar for one JSON value (RFC 8259) with bounded
// whitespace between tokens, so a model cannot pad forever.
const JSONText = `# one JSON value
root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex    ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= ( " " | "\n" [ \t]{0,16} )?
`

// JSONObjectText is JSONText restricted to an object at the top level: the
// grammar of the json_object response format.
const JSONObjectText = `# one JSON object
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex    ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= ( " " | "\n" [ \t]{0,16} )?
`

var builtin struct {
	once      sync.Once
	json, obj *Grammar
	jsonErr   error
	objErr    error
}

func loadBuiltin() {
	builtin.once.Do(func() {
		builtin.json, builtin.jsonErr = Parse(JSONText)
		builtin.obj, builtin.objErr = Parse(JSONObjectText)
	})
}

// JSON returns the compiled JSONText grammar (shared, immutable).
func JSON() *Grammar {
	loadBuiltin()
	if builtin.jsonErr != nil {
		panic("grammar: built-in JSON grammar: " + builtin.jsonErr.Error())
	}
	return builtin.json
}

// JSONObject returns the compiled JSONObjectText grammar (shared, immutable).
func JSONObject() *Grammar {
	loadBuiltin()
	if builtin.objErr != nil {
		panic("grammar: built-in JSON object grammar: " + builtin.objErr.Error())
	}
	return builtin.obj
}
