package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// pretokCases hold the words each pre-tokenizer makes of a few texts. The
// expected words were produced independently with Python's regex module,
// applying llama.cpp's expressions for the pre-tokenizer in turn, with
// llama.cpp's substitution of \v for non-ASCII whitespace where it uses
// std::wregex, and for the expressions it runs on collapsed text (DeepSeek
// V3, Tekken, Chameleon), on that text with the expression rewritten as
// llama.cpp rewrites it.
var pretokCases = []struct {
	pre  preType
	text string
	want []string
}{
	{preGPT2, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'s", " 12345", " o", "'", "CLOCK", "~~", " $", "5", "+", "6", "=", "11", "  \n\n ", " end"}},
	{preGPT2, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " \u0661\u0662\u0663", " x", "\u00B2"}},
	{preGPT2, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "10", ";", "i", "++){", "a", "[", "i", "]='\\", "t", "';}", "\r\n", "\t", "done", " \uFF01\uFF1F\u3002\uFF0C\u2026", " \u201C", "quote", "\u201D"}},
	{preGPT2, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preGPT2, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " \u2014", "dash", "\u2014", " (", "paren", ")", " a", "|", "b"}},
	{preLlama3, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'all", "!", " It", "'s", " ", "123", "45", " o", "'CLOCK", "~~", " $", "5", "+", "6", "=", "11", "  \n\n", " ", " end"}},
	{preLlama3, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661\u0662\u0663", " x", "\u00B2"}},
	{preLlama3, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(i", "=", "0", ";i", "<", "10", ";i", "++){", "a", "[i", "]='\\", "t", "';}\r\n", "\tdone", " \uFF01\uFF1F\u3002\uFF0C\u2026", " \u201C", "quote", "\u201D"}},
	{preLlama3, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preLlama3, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " \u2014", "dash", "\u2014", " (", "paren", ")", " a", "|b"}},
	{preQwen2, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'all", "!", " It", "'s", " ", "1", "2", "3", "4", "5", " o", "'CLOCK", "~~", " $", "5", "+", "6", "=", "1", "1", "  \n\n", " ", " end"}},
	{preQwen2, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661", "\u0662", "\u0663", " x", "\u00B2"}},
	{preQwen2, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(i", "=", "0", ";i", "<", "1", "0", ";i", "++){", "a", "[i", "]='\\", "t", "';}\r\n", "\tdone", " \uFF01\uFF1F\u3002\uFF0C\u2026", " \u201C", "quote", "\u201D"}},
	{preQwen2, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preQwen2, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " \u2014", "dash", "\u2014", " (", "paren", ")", " a", "|b"}},
	{preDefault, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'", "s", " ", "123", "45", " o", "'", "CLOCK", "~~", " ", "$", "5", "+", "6", "=", "11", "  \n\n ", " end"}},
	{preDefault, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661\u0662\u0663", " x", "\u00B2"}},
	{preDefault, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "10", ";", "i", "++){", "a", "[", "i", "]='\\", "t", "';}", "\r\n", "\t", "done", " ", "\uFF01\uFF1F\u3002\uFF0C\u2026", " ", "\u201C", "quote", "\u201D"}},
	{preDefault, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preDefault, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " ", "\u2014", "dash", "\u2014", " ", "(", "paren", ")", " a", "|", "b"}},
	{preFalcon, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'", "s", " ", "123", "45", " o", "'", "CLOCK", "~~", " ", "$", "5", "+", "6", "=", "11", "  \n\n ", " end"}},
	{preFalcon, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " \u0661\u0662\u0663", " x", "\u00B2"}},
	{preFalcon, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "10", ";", "i", "++){", "a", "[", "i", "]='\\", "t", "';}", "\r\n", "\t", "done", " ", "\uFF01\uFF1F\u3002\uFF0C\u2026", " ", "\u201C", "quote", "\u201D"}},
	{preFalcon, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preFalcon, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " ", "\u2014", "dash", "\u2014", " ", "(", "paren", ")", " a", "|", "b"}},
	{preStarcoder, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'s", " ", "1", "2", "3", "4", "5", " o", "'", "CLOCK", "~~", " $", "5", "+", "6", "=", "1", "1", "  \n\n ", " end"}},
	{preStarcoder, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661", "\u0662", "\u0663", " x", "\u00B2"}},
	{preStarcoder, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "1", "0", ";", "i", "++){", "a", "[", "i", "]='\\", "t", "';}", "\r\n", "\t", "done", " \uFF01\uFF1F\u3002\uFF0C\u2026", " \u201C", "quote", "\u201D"}},
	{preStarcoder, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preStarcoder, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " \u2014", "dash", "\u2014", " (", "paren", ")", " a", "|", "b"}},
	{preDeepseekCoder, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'", "s", " ", "1", "2", "3", "4", "5", " o", "'", "CLOCK", "~~ $", "5", "+", "6", "=", "1", "1", "  ", "\n", "\n", " ", " end"}},
	{preDeepseekCoder, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " ", "\uD55C\uAD6D\uC5B4", " ", "\u0661", "\u0662", "\u0663", " x", "\u00B2"}},
	{preDeepseekCoder, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "1", "0", ";", "i", "++", "){", "a", "[", "i", "]", "=", "'\\", "t", "';}", "\r", "\n", "\tdone", " \uFF01\uFF1F", "\u3002", "\uFF0C", "\u2026", " ", "\u201C", "quote", "\u201D"}},
	{preDeepseekCoder, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preDeepseekCoder, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126", "hm", " K", "\u212A", " and", " ", "\u1FBE\u1F7D", " \U0001F600\U0001F600", " ", "\u2014", "dash", "\u2014", " (", "paren", ")", " a", "|", "b"}},
	{preDeepseekLLM, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'", "s", " ", "12345", " o", "'", "CLOCK", "~~", " $", "5", "+", "6", "=", "11", "  ", "\n", "\n", " ", " end"}},
	{preDeepseekLLM, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d", "\u00E9", "j", "\u00E0", " vu", "\u00A0\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " ", "\uD55C\uAD6D\uC5B4", " ", "\u0661\u0662\u0663", " x", "\u00B2"}},
	{preDeepseekLLM, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "10", ";", "i", "++){", "a", "[", "i", "]='\\", "t", "';}", "\r", "\n", "\tdone", " \uFF01\uFF1F", "\u3002", "\uFF0C", "\u2026", " ", "\u201C", "quote", "\u201D"}},
	{preDeepseekLLM, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preDeepseekLLM, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126", "hm", " K", "\u212A", " and", " ", "\u1FBE\u1F7D", " \U0001F600\U0001F600 ", "\u2014", "dash", "\u2014", " (", "paren", ")", " a", "|", "b"}},
	{prePoro, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y'all", "!", " It's", " 12345", " o'CLOCK~~", " $5+6=11", "  \n\n ", " end"}},
	{prePoro, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " \u0661\u0662\u0663", " x\u00B2"}},
	{prePoro, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code:", " for", "(", "i=0;i<10;i++", ")", "{a[i]='\\t';}", "\r\n\t", "done", " \uFF01\uFF1F", "\u3002\uFF0C\u2026", " \u201Cquote\u201D"}},
	{prePoro, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{prePoro, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " \u2014dash\u2014", " (", "paren", ")", " a", "|", "b"}},
	{preViking, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y'all", "!", " It's", " ", "1", "2", "3", "4", "5", " o'CLOCK~~", " $", "5", "+", "6", "=", "1", "1", "  \n\n ", " end"}},
	{preViking, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2", []string{"d\u00E9j\u00E0", " vu", "\u00A0\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661", "\u0662", "\u0663", " x", "\u00B2"}},
	{preViking, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D", []string{"code:", " for", "(", "i=", "0", ";i<", "1", "0", ";i++", ")", "{a[i]='\\t';}", "\r\n\t", "done", " \uFF01\uFF1F", "\u3002\uFF0C\u2026", " \u201Cquote\u201D"}},
	{preViking, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preViking, "\u2126hm K\u212A and \u1FBE\u1F7D \U0001F600\U0001F600 \u2014dash\u2014 (paren) a|b", []string{"\u2126hm", " K\u212A", " and", " \u1FBE\u1F7D", " \U0001F600\U0001F600", " \u2014dash\u2014", " (", "paren", ")", " a", "|", "b"}},
	{preDeepseekV3, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'all", "!", " It", "'s", " ", "123", "45", " o", "'CLOCK", "~~", " $", "5", "+", "6", "=", "11", "  \n\n", " ", " end"}},
	{preDeepseekV3, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2 \u00C0\u00C9cole McDONALD'S iPhone", []string{"d\u00E9j\u00E0", " vu", "\u00A0\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661\u0662\u0663", " x", "\u00B2", " \u00C0\u00C9cole", " McDONALD", "'S", " iPhone"}},
	{preDeepseekV3, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D a/b//\n", []string{"code", ":", " for", "(i", "=", "0", ";i", "<", "10", ";i", "++){", "a", "[i", "]='\\", "t", "';}\r\n", "\tdone", " \uFF01\uFF1F\u3002\uFF0C\u2026", " \u201C", "quote", "\u201D", " a", "/b", "//\n"}},
	{preDeepseekV3, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preDeepseekV3, "<sentinel:42>IMGIMGABCZ IMGIMGABCDEFZ e\u0301t\u00E9 (x)~a ~ \U0001F600\U0001F600 \u2014dash\u2014", []string{"<sentinel", ":", "42", ">IMGIMGABCZ", " IMGIMGABCDEFZ", " e\u0301t\u00E9", " (", "x", ")", "~a", " ", "~", " \U0001F600\U0001F600", " \u2014", "dash", "\u2014"}},
	{preTekken, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'all", "!", " It", "'s", " ", "1", "2", "3", "4", "5", " o", "'CLOCK", "~~", " $", "5", "+", "6", "=", "1", "1", "  \n\n", " ", " end"}},
	{preTekken, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2 \u00C0\u00C9cole McDONALD'S iPhone", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661", "\u0662", "\u0663", " x", "\u00B2", " \u00C0\u00C9cole", " Mc", "DONALD", "'S", " i", "Phone"}},
	{preTekken, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D a/b//\n", []string{"code", ":", " for", "(i", "=", "0", ";i", "<", "1", "0", ";i", "++){", "a", "[i", "]='\\", "t", "';}\r\n", "\tdone", " \uFF01\uFF1F\u3002\uFF0C\u2026", " \u201C", "quote", "\u201D", " a", "/b", "//\n"}},
	{preTekken, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "   "}},
	{preTekken, "<sentinel:42>IMGIMGABCZ IMGIMGABCDEFZ e\u0301t\u00E9 (x)~a ~ \U0001F600\U0001F600 \u2014dash\u2014", []string{"<sentinel", ":", "4", "2", ">IMGIMGABCZ", " IMGIMGABCDEFZ", " e", "\u0301t\u00E9", " (", "x", ")~", "a", " ~", " \U0001F600\U0001F600", " \u2014", "dash", "\u2014"}},
	{preChameleon, "Hello, y'all! It's 12345 o'CLOCK~~ $5+6=11  \n\n  end", []string{"Hello", ",", " y", "'", "all", "!", " It", "'", "s", " ", "1", "2", "3", "4", "5", " o", "'", "CLOCK", "~", "~", " ", "$", "5", "+", "6", "=", "1", "1", "  ", "\n", "\n", "  ", "end"}},
	{preChameleon, "d\u00E9j\u00E0 vu\u00A0\u3000\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8 \uD55C\uAD6D\uC5B4 \u0661\u0662\u0663 x\u00B2 \u00C0\u00C9cole McDONALD'S iPhone", []string{"d\u00E9j\u00E0", " vu", "\u00A0", "\u3000", "\u65E5\u672C\u8A9E\u30C6\u30AD\u30B9\u30C8", " \uD55C\uAD6D\uC5B4", " ", "\u0661", "\u0662", "\u0663", " x", "\u00B2", " \u00C0\u00C9cole", " McDONALD", "'", "S", " iPhone"}},
	{preChameleon, "code: for(i=0;i<10;i++){a[i]='\\t';}\r\n\tdone \uFF01\uFF1F\u3002\uFF0C\u2026 \u201Cquote\u201D a/b//\n", []string{"code", ":", " for", "(", "i", "=", "0", ";", "i", "<", "1", "0", ";", "i", "+", "+", ")", "{", "a", "[", "i", "]", "=", "'", "\\", "t", "'", ";", "}", "\r", "\n", "\t", "done", " ", "\uFF01", "\uFF1F", "\u3002", "\uFF0C", "\u2026", " ", "\u201C", "quote", "\u201D", " a", "/", "b", "/", "/", "\n"}},
	{preChameleon, "   leading and trailing   ", []string{"  ", " leading", " and", " trailing", "  ", " "}},
	{preChameleon, "<sentinel:42>IMGIMGABCZ IMGIMGABCDEFZ e\u0301t\u00E9 (x)~a ~ \U0001F600\U0001F600 \u2014dash\u2014", []string{"<", "sentinel", ":", "4", "2", ">", "IMGIMGABCZ", " IMGIMGABCDEFZ", " e", "\u0301", "t\u00E9", " ", "(", "x", ")", "~", "a", " ", "~", " \U0001F600\U0001F600", " ", "\u2014", "dash", "\u2014"}},
}

func TestPreTokenizers(t *testing.T) {
	for _, c := range pretokCases {
		cp := appendCpts(nil, c.text)
		segs, _ := preSplit(c.pre, cp, nil, nil)
		var got []string
		pos := 0
		for _, n := range segs {
			got = append(got, string(cp[pos:pos+int(n)]))
			pos += int(n)
		}
		assert.Equal(t, c.want, got, "pre-tokenizer %d on %q", c.pre, c.text)
	}
}

// The DeepSeek letter class must keep its exact code points (Ω U+2126, not
// Ω U+03A9 alone) and ascend, as the binary search assumes.
func TestDeepseekLetterClass(t *testing.T) {
	for i := 2; i < len(deepseekLetterRanges); i += 2 {
		assert.Less(t, deepseekLetterRanges[i-1], deepseekLetterRanges[i], "range %d", i/2)
		assert.LessOrEqual(t, deepseekLetterRanges[i], deepseekLetterRanges[i+1], "range %d", i/2)
	}
	for _, r := range []rune{'A', 'z', 0xB5, 0x2126, 0x212A, 0x1FBE, 0x1FD3, 0x1FDB, 0x1F7D, 0x03A9, 0x10400, 0x1E943} {
		assert.True(t, wDeepseekLetter(r), "%U", r)
	}
	for _, r := range []rune{'0', ' ', 0xD7, 0x2127, 0x212E, 0x1E944, 0x4E00} {
		assert.False(t, wDeepseekLetter(r), "%U", r)
	}
}
