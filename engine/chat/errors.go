package chat

import (
	"errors"
	"fmt"
)

// ErrNoTemplate is returned (wrapped) by Load when a checkpoint has neither a
// chat_template.jinja file nor a chat_template in tokenizer_config.json.
var ErrNoTemplate = errors.New("chat: checkpoint has no chat template")

// ErrImageContent is the cause of a RequestError for a message content part
// that carries an image: the engine serves text-only models.
var ErrImageContent = errors.New("chat: image content is not supported")

// ErrContentPart is the cause of a RequestError for a message content part
// whose type is neither text nor image (audio, files, unknown types).
var ErrContentPart = errors.New("chat: unsupported content part")

// ParseError reports a template that cannot be compiled. Line is 1-based
// and 0 when unknown.
type ParseError struct {
	Name string // where the source came from, e.g. a file path
	Line int
	Err  error
}

// Error returns the message.
func (e *ParseError) Error() string {
	name := e.Name
	if name == "" {
		name = "template"
	}
	if e.Line > 0 {
		return fmt.Sprintf("chat: parse %s: line %d: %v", name, e.Line, e.Err)
	}
	return fmt.Sprintf("chat: parse %s: %v", name, e.Err)
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// RenderError reports a template that failed while rendering a request, other
// than by calling raise_exception (see ExceptionError).
type RenderError struct {
	Name string
	Err  error
}

// Error returns the message.
func (e *RenderError) Error() string {
	name := e.Name
	if name == "" {
		name = "template"
	}
	return fmt.Sprintf("chat: render %s: %v", name, e.Err)
}

// Unwrap returns the cause.
func (e *RenderError) Unwrap() error { return e.Err }

// ExceptionError is returned when the template itself rejects a request by
// calling raise_exception(message), e.g. for an unsupported role order.
// Servers usually answer it with 400: the request, not the server, is at fault.
type ExceptionError struct {
	Message string
}

// Error returns the message.
func (e *ExceptionError) Error() string {
	return "chat: template raised an exception: " + e.Message
}

// RequestError reports request data that cannot be turned into template
// input. Field names the offending JSON path, e.g. "messages[2].content[1]".
// Err is the cause; ErrImageContent and ErrContentPart can be matched with
// errors.Is.
type RequestError struct {
	Field string
	Err   error
}

// Error returns the message.
func (e *RequestError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("chat: invalid request: %v", e.Err)
	}
	return fmt.Sprintf("chat: invalid request: %s: %v", e.Field, e.Err)
}

// Unwrap returns the cause.
func (e *RequestError) Unwrap() error { return e.Err }
