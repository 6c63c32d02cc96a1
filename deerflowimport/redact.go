package deerflowimport

import (
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
)

// rowRedactor cleans the JSON of run rows and feedback, as the event log
// cleans events.
var rowRedactor = redact.New(redact.Options{})

// redactRun cleans a run row as the thread API cleans the rows it is
// given (threadsvc): the secrets of its text, of its metadata and kwargs
// and of the model names of its usage are replaced by the redact
// package's markers; models whose names redact alike add up.
func redactRun(r runevents.ThreadRun) (runevents.ThreadRun, error) {
	for _, s := range []*string{&r.ModelName, &r.OperationKind, &r.AssistantID, &r.StopReason} {
		*s = redact.Text(*s)
	}
	if len(r.Usage.ByModel) > 0 {
		byModel := make(map[string]runevents.ModelUsage, len(r.Usage.ByModel))
		for model, u := range r.Usage.ByModel {
			model = redact.Text(model)
			sum := byModel[model]
			sum.InputTokens += u.InputTokens
			sum.OutputTokens += u.OutputTokens
			sum.TotalTokens += u.TotalTokens
			byModel[model] = sum
		}
		r.Usage.ByModel = byModel
	}
	for _, f := range []struct {
		name string
		raw  *[]byte
	}{{"metadata_json", (*[]byte)(&r.Metadata)}, {"kwargs_json", (*[]byte)(&r.Kwargs)}} {
		if len(*f.raw) == 0 {
			continue
		}
		clean, _, err := rowRedactor.JSON(*f.raw)
		if err != nil {
			return r, runstream.Errorf(runstream.CodeInvalidArgument, "%s is not JSON", f.name)
		}
		*f.raw = clean
	}
	return r, nil
}

// redactFeedback cleans the comment and a rating string of a feedback.
func redactFeedback(f runevents.Feedback) (runevents.Feedback, error) {
	f.Comment = redact.Text(f.Comment)
	rating, _, err := rowRedactor.JSON(f.Rating)
	if err != nil {
		return f, runstream.Errorf(runstream.CodeInvalidArgument, "rating %s is not a number or a string", short(string(f.Rating)))
	}
	f.Rating = rating
	return f, nil
}
