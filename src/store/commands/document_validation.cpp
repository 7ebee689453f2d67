#include "store/commands/document_validation.h"

#include <fmt/format.h>

#include "common/log.h"
#include "store/query/document_validator.h"
#include "store/storage/error_with_info.h"

namespace halo::store {
namespace {

thread_local bool t_bypass = false;

/// Applies the validator to `doc`: throws (action error) or logs (action warn).
void enforce(const CollectionEntry& c, const query::CollectionValidation& v, const bson_t* doc) {
    if (v.validator->matches(doc)) return;
    bson::Doc errInfo = v.validator->errInfo(doc);
    if (v.action == query::ValidationAction::kWarn) {
        log::warning("storage", 20294, "Document would fail validation",
                     fmt::format(R"({{"namespace":{},"document":{},"errInfo":{}}})",
                                 log::quote(c.ns), bson::toJson(doc), errInfo.toJson()));
        return;
    }
    auto info = std::make_shared<bson::Doc>();
    BSON_APPEND_DOCUMENT(info->mut(), "errInfo", errInfo.get());
    throw ErrorWithInfo(Status(ErrorCode::DocumentValidationFailure, "Document failed validation"),
                        std::move(info));
}

}  // namespace

BypassDocumentValidation::BypassDocumentValidation(bool bypass) : saved_(t_bypass) {
    t_bypass = t_bypass || bypass;
}

BypassDocumentValidation::~BypassDocumentValidation() {
    t_bypass = saved_;
}

void validateInsert(const CollectionEntry& c, const bson_t* doc) {
    if (!c.validation || !c.validation->active() || t_bypass) return;
    enforce(c, *c.validation, doc);
}

void validateUpdate(const CollectionEntry& c, const bson_t* before, const bson_t* after) {
    if (!c.validation || !c.validation->active() || t_bypass) return;
    // moderate: documents that already broke the rules may keep breaking them.
    if (c.validation->level == query::ValidationLevel::kModerate &&
        !c.validation->validator->matches(before))
        return;
    enforce(c, *c.validation, after);
}

}  // namespace halo::store
