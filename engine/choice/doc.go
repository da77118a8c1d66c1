// Package choice answers closed-schema JSON requests by scoring
// (docs/serving.md §10): for a flat, closed object whose fields are
// booleans or string enums, every candidate value of every field is
// scored as a branch forked from one shared prefilled prompt, and the
// highest-scoring value of each field wins. The answer is valid JSON that
// satisfies the schema by construction, and each field comes with every
// candidate's score.
//
// Fields are decided independently, each branch starting right after the
// opening brace; scores are sequence log-likelihoods under the model, not
// calibrated probabilities. The package parses schemas, builds the branch
// token sequences and scores them on an engine model; rendering the chat
// prompt and the HTTP and command-line surfaces are its callers'.
package choice
