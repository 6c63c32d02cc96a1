package runstream

// Owner selects whose rows a read or delete sees. The zero Owner is
// invalid, so that a caller who forgot to pass one fails closed.
type Owner struct {
	userID string
	any    bool
}

// OwnedBy returns the Owner that sees only rows stamped with userID.
func OwnedBy(userID string) Owner { return Owner{userID: userID} }

// AnyOwner sees every row regardless of owner. It is for internal callers
// (migrations, the engine, administrators), never for a user's request.
var AnyOwner = Owner{any: true}

// IsZero reports whether o is the invalid zero Owner.
func (o Owner) IsZero() bool { return !o.any && o.userID == "" }

// All reports whether o is AnyOwner.
func (o Owner) All() bool { return o.any }

// UserID returns the user o is restricted to ("" for AnyOwner).
func (o Owner) UserID() string { return o.userID }

// Sees reports whether a row stamped with userID is visible to o.
func (o Owner) Sees(userID string) bool { return o.any || (o.userID != "" && o.userID == userID) }

// CheckOwner rejects the zero Owner with CodeInvalidArgument.
func CheckOwner(o Owner) error {
	if o.IsZero() {
		return Errorf(CodeInvalidArgument, "an owner is required: OwnedBy(user) or AnyOwner")
	}
	return nil
}
