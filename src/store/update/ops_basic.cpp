// $set, $setOnInsert, $unset, $currentDate, $rename.
#include <fmt/format.h>

#include "common/status.h"
#include "store/update/format.h"
#include "store/update/modifier.h"

namespace halo::update {

std::optional<ModifierType> modifierTypeFor(std::string_view op) {
    static const std::pair<std::string_view, ModifierType> kTable[] = {
        {"$set", ModifierType::kSet},
        {"$setOnInsert", ModifierType::kSetOnInsert},
        {"$unset", ModifierType::kUnset},
        {"$inc", ModifierType::kInc},
        {"$mul", ModifierType::kMul},
        {"$min", ModifierType::kMin},
        {"$max", ModifierType::kMax},
        {"$rename", ModifierType::kRename},
        {"$currentDate", ModifierType::kCurrentDate},
        {"$push", ModifierType::kPush},
        {"$addToSet", ModifierType::kAddToSet},
        {"$pull", ModifierType::kPull},
        {"$pullAll", ModifierType::kPullAll},
        {"$pop", ModifierType::kPop},
        {"$bit", ModifierType::kBit},
    };
    for (auto& [name, t] : kTable) {
        if (name == op) return t;
    }
    return std::nullopt;
}

std::string lastComponent(const std::string& path) {
    auto pos = path.rfind('.');
    return pos == std::string::npos ? path : path.substr(pos + 1);
}

void ApplyContext::logArrayChange(const std::string& path, const Element* before,
                                  const Element& after) const {
    if (!log) return;
    if (!before || !before->isArray() || !after.isArray()) {
        log->updated.push_back(path);
        return;
    }
    if (after.size() < before->size()) {
        log->truncated.emplace_back(path, static_cast<uint32_t>(after.size()));
    }
    for (size_t i = 0; i < after.size(); ++i) {
        if (i >= before->size() || !binaryEqual(*before->child(i), *after.child(i))) {
            log->updated.push_back(fmt::format("{}.{}", path, i));
        }
    }
}

namespace {

class SetModifier final : public Modifier {
  public:
    SetModifier(const bson_value_t& v, bool onInsert)
        : value_(Element::fromValue("", v)), onInsert_(onInsert) {}
    bool insertOnly() const override { return onInsert_; }
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        if (binaryEqual(e, *value_)) return false;
        e.setValueFrom(*value_);
        ctx.logUpdated(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        return value_->clone("");
    }

  private:
    std::unique_ptr<Element> value_;
    bool onInsert_;
};

class UnsetModifier final : public Modifier {
  public:
    bool createsMissing() const override { return false; }
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        Element* parent = e.parent();
        if (parent->isArray()) {
            // Array elements are nulled, not removed, so other indexes keep their meaning.
            if (e.type() == BSON_TYPE_NULL) return false;
            e.setNull();
            ctx.logUpdated(path);
            return true;
        }
        parent->removeChild(&e);  // destroys e
        ctx.logRemoved(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        return nullptr;
    }
};

class PlaceholderModifier final : public Modifier {
  public:
    bool createsMissing() const override { return false; }
    bool applyExisting(Element&, const std::string&, ApplyContext&) const override { return false; }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext&) const override {
        return nullptr;
    }
};

class CurrentDateModifier final : public Modifier {
  public:
    explicit CurrentDateModifier(bool timestamp) : timestamp_(timestamp) {}
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        auto v = now(ctx);
        if (e.kind() == Element::Kind::kScalar && e.type() == v->type() && binaryEqual(e, *v)) {
            return false;
        }
        e.setValueFrom(*v);
        ctx.logUpdated(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string&, ApplyContext& ctx) const override {
        return now(ctx);
    }

  private:
    std::unique_ptr<Element> now(const ApplyContext& ctx) const {
        bson_value_t v{};
        if (timestamp_) {
            v.value_type = BSON_TYPE_TIMESTAMP;
            v.value.v_timestamp.timestamp = static_cast<uint32_t>(ctx.nowMillis / 1000);
            v.value.v_timestamp.increment = 1;
        } else {
            v.value_type = BSON_TYPE_DATE_TIME;
            v.value.v_datetime = ctx.nowMillis;
        }
        return Element::fromValue("", v);
    }
    bool timestamp_;
};

/// Finds the element at an exact path (objects by name, arrays by index).
Element* resolveExact(Element* root, const std::vector<std::string>& parts) {
    Element* cur = root;
    for (auto& p : parts) {
        cur = cur->findChild(p);
        if (!cur) return nullptr;
    }
    return cur;
}

class RenameModifier final : public Modifier {
  public:
    RenameModifier(std::vector<std::string> fromPath, std::string from, std::vector<std::string> to)
        : fromPath_(std::move(fromPath)), from_(std::move(from)), toPath_(std::move(to)) {}

    bool noopOnNonViablePath(const ApplyContext& ctx) const override {
        return resolveExact(ctx.root, fromPath_) == nullptr;
    }
    bool applyExisting(Element& e, const std::string& path, ApplyContext& ctx) const override {
        Element* src = checkedSource(path, ctx);
        if (!src) return false;
        e.setValueFrom(*src);
        removeSource(src, ctx);
        ctx.logUpdated(path);
        return true;
    }
    std::unique_ptr<Element> valueForMissing(const std::string& path,
                                             ApplyContext& ctx) const override {
        Element* src = checkedSource(path, ctx);
        if (!src) return nullptr;
        auto v = src->clone("");
        removeSource(src, ctx);
        return v;
    }

  private:
    std::string idText(const ApplyContext& ctx) const {
        return ctx.idElement.empty() ? "no id" : ctx.idElement;
    }
    Element* checkedSource(const std::string& to, ApplyContext& ctx) const {
        Element* src = resolveExact(ctx.root, fromPath_);
        if (!src) return nullptr;
        for (Element* a = src->parent(); a && a != ctx.root; a = a->parent()) {
            if (a->isArray()) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The source field cannot be an array element, '{}' in doc "
                                      "with {} has an array field called '{}'",
                                      from_, idText(ctx), a->key()));
            }
        }
        Element* cur = ctx.root;
        for (size_t i = 0; i + 1 < toPath_.size() && cur; ++i) {
            cur = cur->findChild(toPath_[i]);
            if (cur && cur->isArray()) {
                uasserted(ErrorCode::BadValue,
                          fmt::format("The destination field cannot be an array element, '{}' in "
                                      "doc with {} has an array field called '{}'",
                                      to, idText(ctx), cur->key()));
            }
        }
        if (ctx.checkIdImmutable && fromPath_.front() == "_id") {
            uasserted(ErrorCode::ImmutableField,
                      fmt::format("Performing an update on the path '{}' would modify the "
                                  "immutable field '_id'",
                                  from_));
        }
        return src;
    }
    void removeSource(Element* src, ApplyContext& ctx) const {
        src->parent()->removeChild(src);
        ctx.logRemoved(from_);
    }

    std::vector<std::string> fromPath_;
    std::string from_;
    std::vector<std::string> toPath_;
};

}  // namespace

std::unique_ptr<Modifier> makeSetModifier(const bson_value_t& v, bool onInsertOnly) {
    return std::make_unique<SetModifier>(v, onInsertOnly);
}

std::unique_ptr<Modifier> makeUnsetModifier() {
    return std::make_unique<UnsetModifier>();
}

std::unique_ptr<Modifier> makePlaceholderModifier() {
    return std::make_unique<PlaceholderModifier>();
}

std::unique_ptr<Modifier> makeCurrentDateModifier(std::string_view field, const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_BOOL) return std::make_unique<CurrentDateModifier>(false);
    if (v.value_type == BSON_TYPE_DOCUMENT) {
        bool timestamp = false;
        bool sawType = false;
        bson_iter_t it;
        bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            std::string_view key = bson_iter_key(&it);
            if (key == "$type") {
                std::string_view s;
                if (BSON_ITER_HOLDS_UTF8(&it)) {
                    uint32_t len;
                    const char* str = bson_iter_utf8(&it, &len);
                    s = std::string_view(str, len);
                }
                if (s != "date" && s != "timestamp") {
                    uasserted(ErrorCode::BadValue,
                              "The '$type' string field is required to be 'date' or 'timestamp': "
                              "{$currentDate: {field : {$type: 'date'}}}");
                }
                timestamp = s == "timestamp";
                sawType = true;
            } else {
                uasserted(ErrorCode::BadValue,
                          fmt::format("Unrecognized $currentDate option: {}", key));
            }
        }
        if (!sawType) {
            uasserted(ErrorCode::BadValue,
                      "The '$type' string field is required to be 'date' or 'timestamp': "
                      "{$currentDate: {field : {$type: 'date'}}}");
        }
        return std::make_unique<CurrentDateModifier>(timestamp);
    }
    uasserted(ErrorCode::BadValue,
              fmt::format("{} is not valid type for $currentDate. Please use a boolean ('true') or "
                          "a $type expression ({{$type: 'timestamp/date'}}).",
                          field));
}

std::unique_ptr<Modifier> makeRenameModifier(std::vector<std::string> fromPath, std::string from,
                                             std::vector<std::string> toPath) {
    return std::make_unique<RenameModifier>(std::move(fromPath), std::move(from),
                                            std::move(toPath));
}

}  // namespace halo::update
