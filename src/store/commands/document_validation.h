#pragma once
// Document validation on the write path, as mongod enforces it: inserts (and
// an upsert's insert) are always checked; updates and replacements with
// validationLevel strict, and with moderate only when the stored version
// passed; nothing with validationLevel off or under bypassDocumentValidation.
// A failure is DocumentValidationFailure (121) "Document failed validation"
// carrying {errInfo: {failingDocumentId, details}}; with validationAction warn
// the write goes ahead and log id 20294 "Document would fail validation" is
// written instead.
#include "store/storage/catalog.h"

namespace halo::store {

/// While alive, writes on this thread skip document validation (a write
/// command with bypassDocumentValidation: true). Not reentrant across threads.
class BypassDocumentValidation {
  public:
    explicit BypassDocumentValidation(bool bypass);
    ~BypassDocumentValidation();
    BypassDocumentValidation(const BypassDocumentValidation&) = delete;
    BypassDocumentValidation& operator=(const BypassDocumentValidation&) = delete;

  private:
    bool saved_;
};

/// Checks a document about to be inserted. Throws ErrorWithInfo (121).
void validateInsert(const CollectionEntry& c, const bson_t* doc);

/// Checks the new version `after` of a document whose stored version is `before`.
void validateUpdate(const CollectionEntry& c, const bson_t* before, const bson_t* after);

}  // namespace halo::store
