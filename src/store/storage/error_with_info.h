#pragma once
// An error whose reply carries fields next to {code, errmsg} (mongod's
// ErrorExtraInfo): keyPattern/keyValue of a duplicate key, errInfo of a
// document validation failure. The dispatcher and the write-error lists append
// info() to the error document as it is.
#include <memory>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::store {

class ErrorWithInfo : public DBException {
  public:
    ErrorWithInfo(Status s, std::shared_ptr<const bson::Doc> info)
        : DBException(std::move(s)), info_(std::move(info)) {}
    /// The extra fields (a document), e.g. {errInfo: {...}}.
    const std::shared_ptr<const bson::Doc>& info() const { return info_; }

  private:
    std::shared_ptr<const bson::Doc> info_;
};

}  // namespace halo::store
