#pragma once
// Document validation of a collection, as mongod enforces it: the validator (a
// query filter, with $jsonSchema and $expr) and the options that control it,
// validationLevel (strict | moderate | off) and validationAction (error | warn).
//
// Pure: parsing and evaluation only. The write path decides when to check
// (inserts always, updates per validationLevel, never with
// bypassDocumentValidation) and what to do on failure (storage and logging).
// A parsed DocumentValidator is immutable; its methods are const, never throw,
// and may run concurrently.
#include <bson/bson.h>

#include <memory>
#include <string_view>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::query {

class Collator;
class Matcher;

enum class ValidationLevel { kStrict, kModerate, kOff };
enum class ValidationAction { kError, kWarn };

class DocumentValidator {
  public:
    ~DocumentValidator();

    /// Parses a validator as create and collMod do: query operators, $expr and
    /// $jsonSchema; $where, $text and $near are "not allowed in this context".
    /// Errors keep the parser's code, with mongod's "Parsing of collection
    /// validator failed" context.
    /// `collator`: the collection's default collation, which the validator's
    /// string comparisons use, as in mongod (null: binary).
    static StatusWith<std::unique_ptr<DocumentValidator>> parse(
        const bson_t* validator, std::shared_ptr<const Collator> collator = nullptr);

    /// True when `doc` passes (an $expr that fails to evaluate does not pass).
    bool matches(const bson_t* doc) const;

    /// A DocumentValidationFailure's errInfo for a document that does not pass:
    /// {failingDocumentId: <_id>, details: {operatorName, ...}}.
    bson::Doc errInfo(const bson_t* doc) const;

  private:
    DocumentValidator() = default;
    std::unique_ptr<Matcher> matcher_;
};

/// The validation settings stored in a collection's options.
struct CollectionValidation {
    std::shared_ptr<const DocumentValidator> validator;  // null: none (or {})
    ValidationLevel level = ValidationLevel::kStrict;
    ValidationAction action = ValidationAction::kError;

    /// Reads validator / validationLevel / validationAction from create or
    /// collMod options, with mongod's codes (TypeMismatch for a wrong type,
    /// BadValue for an unknown level or action, the parser's for the validator);
    /// `command` names the command in messages ("create.validationLevel").
    static StatusWith<CollectionValidation> fromOptions(
        const bson_t* options, std::string_view command,
        std::shared_ptr<const Collator> collator = nullptr);
    bool active() const { return validator && level != ValidationLevel::kOff; }
};

}  // namespace halo::query
