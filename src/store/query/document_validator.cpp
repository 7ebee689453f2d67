#include "store/query/document_validator.h"

#include <fmt/format.h>

#include "store/query/matcher.h"
#include "store/query/validation_error.h"

namespace halo::query {

DocumentValidator::~DocumentValidator() = default;

StatusWith<std::unique_ptr<DocumentValidator>> DocumentValidator::parse(
    const bson_t* validator, std::shared_ptr<const Collator> collator) {
    MatcherParseOptions options;
    options.collator = std::move(collator);
    options.annotate = true;
    options.forValidator = true;
    auto sw = Matcher::parse(validator, options);
    if (!sw.isOK())
        return Status(
            sw.getStatus().code(),
            "Parsing of collection validator failed :: caused by :: " + sw.getStatus().reason());
    std::unique_ptr<DocumentValidator> v(new DocumentValidator());
    v->matcher_ = std::move(sw.getValue());
    return v;
}

bool DocumentValidator::matches(const bson_t* doc) const {
    try {
        return matcher_->matches(doc);
    } catch (const DBException&) {
        return false;
    }
}

bson::Doc DocumentValidator::errInfo(const bson_t* doc) const {
    bson::Doc out;
    bson_iter_t id;
    if (bson::find(doc, "_id", &id)) bson::appendIter(out.mut(), "failingDocumentId", id);
    bson::Doc details = validationErrorDetails(*matcher_, doc);
    BSON_APPEND_DOCUMENT(out.mut(), "details", details.get());
    return out;
}

namespace {

Status wrongType(std::string_view command, std::string_view field, bson_type_t t,
                 std::string_view expected) {
    return Status(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type '{}'",
                              command, field, bson::typeName(t), expected));
}

/// One of `values` (an IDL enumeration), or the error mongod's IDL parser gives.
StatusWith<int> enumeration(const bson_t* options, std::string_view command, std::string_view field,
                            std::initializer_list<std::string_view> values, int dflt) {
    bson_iter_t it;
    if (!bson::find(options, field, &it)) return dflt;
    if (!BSON_ITER_HOLDS_UTF8(&it)) return wrongType(command, field, bson_iter_type(&it), "string");
    std::string_view s = bson_iter_utf8(&it, nullptr);
    int i = 0;
    for (auto v : values) {
        if (v == s) return i;
        ++i;
    }
    return Status(ErrorCode::BadValue,
                  fmt::format("Enumeration value '{}' for field '{}.{}' is not a valid value.", s,
                              command, field));
}

}  // namespace

StatusWith<CollectionValidation> CollectionValidation::fromOptions(
    const bson_t* options, std::string_view command, std::shared_ptr<const Collator> collator) {
    CollectionValidation cv;
    auto level = enumeration(options, command, "validationLevel", {"strict", "moderate", "off"}, 0);
    if (!level.isOK()) return level.getStatus();
    cv.level = static_cast<ValidationLevel>(level.getValue());
    auto action = enumeration(options, command, "validationAction", {"error", "warn"}, 0);
    if (!action.isOK()) return action.getStatus();
    cv.action = static_cast<ValidationAction>(action.getValue());
    bson_iter_t it;
    if (bson::find(options, "validator", &it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return wrongType(command, "validator", bson_iter_type(&it), "object");
        bson_t v;
        bson::subDocument(options, "validator", &v);
        if (bson_count_keys(&v) > 0) {
            auto sw = DocumentValidator::parse(&v, collator);
            if (!sw.isOK()) return sw.getStatus();
            cv.validator = std::move(sw.getValue());
        }
    }
    return cv;
}

}  // namespace halo::query
