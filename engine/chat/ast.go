package chat

// Statement nodes.
type node interface{}

type textNode struct{ s string }

type outputNode struct {
	e   expr
	pos Pos
}

type ifNode struct {
	conds  []expr
	bodies [][]node // len(bodies) == len(conds) or len(conds)+1 with else
}

type forNode struct {
	targets []string
	iter    expr
	filter  expr // optional "if" clause
	body    []node
	els     []node
	pos     Pos
}

type setNode struct {
	targets []string // one name, or several for unpacking
	ns      string   // non-empty for "set ns.attr = ..."
	attr    string
	value   expr
	body    []node // block form {% set x %}...{% endset %}
	block   bool   // the block form (body may be empty)
	pos     Pos
}

type macroNode struct {
	name     string
	params   []string
	defaults []expr // same length as params; nil where no default
	body     []node
}

// filterBlockNode is {% filter f | g(x) %}body{% endfilter %}: the body's
// output passed through the filters.
type filterBlockNode struct {
	chain []*filterExpr // arg unused
	body  []node
}

type breakNode struct{}
type continueNode struct{}

// Expression nodes.
type expr interface{}

type constExpr struct{ v value }

type nameExpr struct {
	name string
	pos  Pos
}

type listExpr struct {
	items []expr
	tuple bool
}

type dictExpr struct{ keys, vals []expr }

type attrExpr struct {
	obj  expr
	name string
	pos  Pos
}

type indexExpr struct {
	obj, idx expr
	pos      Pos
}

type sliceExpr struct {
	obj              expr
	start, stop, stp expr // each may be nil
	pos              Pos
}

type callExpr struct {
	fn     expr
	args   []expr
	kwName []string
	kwVal  []expr
	pos    Pos
}

// starExpr is *x in a call's arguments: x's items become arguments.
type starExpr struct{ x expr }

type filterExpr struct {
	arg    expr
	name   string
	fn     filterFunc
	args   []expr
	kwName []string
	kwVal  []expr
	pos    Pos
}

type testExpr struct {
	arg  expr
	name string
	fn   testFunc
	args []expr
	neg  bool
	pos  Pos
}

type binExpr struct {
	op   string
	l, r expr
	pos  Pos
}

type unaryExpr struct {
	op  string // "not", "-", "+"
	x   expr
	pos Pos
}

type condExpr struct {
	cond, yes, no expr // no may be nil (undefined)
}

// compareExpr is a chained comparison a < b < c.
type compareExpr struct {
	first expr
	ops   []string // ==, !=, <, <=, >, >=, in, notin
	rest  []expr
	pos   Pos
}
