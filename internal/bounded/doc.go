// Package bounded reads files and streams whose size an untrusted party
// decides, refusing more than a limit instead of holding whatever comes:
// a hash list, an index, a key file, a tokenizer, a server's answer.
//
// It is not a parser and says nothing of what the bytes mean; each caller
// keeps its own error text by telling the errors apart with errors.As
// (TooLargeError, NotRegularError, ReadError) and naming the file its own
// way.
package bounded
