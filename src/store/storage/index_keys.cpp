#include "store/storage/index_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "bson/compare.h"
#include "bson/doc.h"
#include "store/storage/key_string.h"

namespace halo::store {
namespace {

// ---- key pattern parsing ----------------------------------------------------

std::vector<std::string> splitPath(std::string_view path) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        if (dot == std::string_view::npos) {
            parts.emplace_back(path.substr(start));
            return parts;
        }
        parts.emplace_back(path.substr(start, dot - start));
        start = dot + 1;
    }
}

bool isKnownSpecialIndexType(std::string_view s) {
    return s == "text" || s == "2d" || s == "2dsphere" || s == "2dsphere_bucket" || s == "hashed" ||
           s == "geoHaystack" || s == "wildcard" || s == "columnstore";
}

Status validatePath(std::string_view path) {
    if (path.empty()) return {ErrorCode::CannotCreateIndex, "Index keys cannot be an empty field."};
    auto parts = splitPath(path);
    for (size_t i = 0; i < parts.size(); ++i) {
        const std::string& part = parts[i];
        if (part.empty()) {
            return {ErrorCode::CannotCreateIndex, "Index keys cannot contain an empty field."};
        }
        if (part[0] != '$') continue;
        bool dbRefField = i != 0 && (part == "$id" || part == "$ref" || part == "$db");
        if (!dbRefField) {
            return {ErrorCode::CannotCreateIndex,
                    "Index key contains an illegal field name: field name starts with '$'."};
        }
    }
    return Status::OK();
}

// ---- key generation ---------------------------------------------------------

bool isArray(const bson_value_t& v) {
    return v.value_type == BSON_TYPE_ARRAY;
}
bool isDocument(const bson_value_t& v) {
    return v.value_type == BSON_TYPE_DOCUMENT;
}

bool allDigits(std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool arrayIsEmpty(const bson_value_t& arr) {
    return arr.value.v_doc.data_len <= 5;
}

/// Finds the first element named `name` in a document or array value.
bool lookup(const bson_value_t& container, std::string_view name, bson_value_t* out) {
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, container.value.v_doc.data, container.value.v_doc.data_len))
        return false;
    if (!bson_iter_find_w_len(&it, name.data(), static_cast<int>(name.size()))) return false;
    *out = *bson_iter_value(&it);
    return true;
}

bson_value_t makeValue(bson_type_t t) {
    bson_value_t v;
    std::memset(&v, 0, sizeof v);
    v.value_type = t;
    return v;
}

/// Where one index field stands while walking a document.
struct FieldState {
    enum Kind { kPending, kValue, kMissing };
    Kind kind = kPending;
    bson_value_t value{};  // kValue: the key component; kPending: the document/array to walk
    size_t next = 0;       // kPending: index of the next path component
};

/// A field whose walk stopped at an array.
struct Attachment {
    size_t field;
    bson_value_t array;
    size_t next;       // path components consumed up to the array
    std::string name;  // the array's field name (for the parallel-arrays error)
};

class KeyGenerator {
  public:
    KeyGenerator(const IndexKeyPattern& p, const KeyGenOptions& o) : pattern_(p), opts_(o) {
        for (const auto& f : p.fields) paths_.push_back(splitPath(f.first));
    }

    Status run(std::vector<FieldState> st) {
        std::vector<Attachment> attached;
        for (size_t i = 0; i < st.size(); ++i) {
            if (st[i].kind == FieldState::kPending) walk(i, &st[i], &attached);
        }
        if (attached.empty()) {
            emit(st);
            return Status::OK();
        }
        const Attachment& first = attached.front();
        for (const auto& a : attached) {
            if (a.array.value.v_doc.data != first.array.value.v_doc.data) {
                return {ErrorCode::CannotIndexParallelArrays,
                        fmt::format("cannot index parallel arrays [{}] [{}]", a.name, first.name)};
            }
        }
        return expand(st, attached);
    }

    bool multikey() const { return multikey_; }
    std::vector<std::string> takeKeys() {
        std::sort(keys_.begin(), keys_.end());
        keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
        return std::move(keys_);
    }

  private:
    // Follows field i's path from its pending base through documents until it
    // resolves to a value, is missing, or reaches an array (an attachment).
    void walk(size_t i, FieldState* f, std::vector<Attachment>* attached) {
        const auto& comps = paths_[i];
        bson_value_t v = f->value;
        size_t k = f->next;
        while (true) {
            if (isArray(v)) {
                attached->push_back({i, v, k, k > 0 ? comps[k - 1] : std::string()});
                return;
            }
            if (k == comps.size()) {
                f->kind = FieldState::kValue;
                f->value = v;
                return;
            }
            bson_value_t child;
            if (!isDocument(v) || !lookup(v, comps[k], &child)) {
                f->kind = FieldState::kMissing;
                return;
            }
            v = child;
            ++k;
        }
    }

    // Produces the keys for each element of the one array the attached fields reached.
    Status expand(const std::vector<FieldState>& st, const std::vector<Attachment>& attached) {
        const bson_value_t& arr = attached.front().array;
        enum Role { kTrailing, kPositional, kElementwise };
        std::vector<Role> roles;
        std::vector<FieldState> positional(attached.size());
        bool expands = false;
        for (size_t j = 0; j < attached.size(); ++j) {
            const Attachment& a = attached[j];
            const auto& comps = paths_[a.field];
            bson_value_t sel;
            if (a.next == comps.size()) {
                roles.push_back(kTrailing);
                expands = true;
            } else if (allDigits(comps[a.next]) && lookup(arr, comps[a.next], &sel)) {
                Status s = checkNotAmbiguous(arr, comps[a.next]);
                if (!s.isOK()) return s;
                roles.push_back(kPositional);
                FieldState& ps = positional[j];
                if (a.next + 1 == comps.size()) {
                    // An array element reached by position is indexed whole ([] as undefined).
                    ps.kind = FieldState::kValue;
                    ps.value =
                        isArray(sel) && arrayIsEmpty(sel) ? makeValue(BSON_TYPE_UNDEFINED) : sel;
                } else {
                    ps.kind = FieldState::kPending;
                    ps.value = sel;
                    ps.next = a.next + 1;
                }
            } else {
                roles.push_back(kElementwise);
                expands = true;
            }
        }

        auto stateFor = [&](const bson_value_t* elem) {
            std::vector<FieldState> next = st;
            for (size_t j = 0; j < attached.size(); ++j) {
                FieldState& f = next[attached[j].field];
                switch (roles[j]) {
                    case kTrailing:
                        f.kind = FieldState::kValue;
                        f.value = elem ? *elem : makeValue(BSON_TYPE_UNDEFINED);
                        break;
                    case kPositional:
                        f = positional[j];
                        break;
                    case kElementwise:
                        if (elem && isDocument(*elem)) {
                            f.kind = FieldState::kPending;
                            f.value = *elem;
                            f.next = attached[j].next;
                        } else {
                            f.kind = FieldState::kMissing;
                        }
                        break;
                }
            }
            return next;
        };

        if (!expands) return run(stateFor(nullptr));  // every field took its element by position
        multikey_ = true;
        if (arrayIsEmpty(arr)) return run(stateFor(nullptr));
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, arr.value.v_doc.data, arr.value.v_doc.data_len)) {
            return {ErrorCode::InvalidBSON, "invalid array in indexed document"};
        }
        while (bson_iter_next(&it)) {
            bson_value_t elem = *bson_iter_value(&it);
            Status s = run(stateFor(&elem));
            if (!s.isOK()) return s;
        }
        return Status::OK();
    }

    static Status checkNotAmbiguous(const bson_value_t& arr, const std::string& index) {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, arr.value.v_doc.data, arr.value.v_doc.data_len)) {
            return Status::OK();
        }
        while (bson_iter_next(&it)) {
            const bson_value_t* e = bson_iter_value(&it);
            bson_value_t ignored;
            if (isDocument(*e) && lookup(*e, index, &ignored)) {
                bson_t arrDoc;
                std::string shown = "[]";
                if (bson_init_static(&arrDoc, arr.value.v_doc.data, arr.value.v_doc.data_len)) {
                    shown = bson::toJson(&arrDoc);
                }
                return {ErrorCode::Location16746,
                        fmt::format("Ambiguous field name found in array (do not use numeric field "
                                    "names in embedded elements in an array), field: '{}' for "
                                    "array: {}",
                                    index, shown)};
            }
        }
        return Status::OK();
    }

    void emit(const std::vector<FieldState>& st) {
        bool allMissing = true;
        std::string key;
        const bson_value_t null = makeValue(BSON_TYPE_NULL);
        for (size_t i = 0; i < st.size(); ++i) {
            bool missing = st[i].kind != FieldState::kValue;
            allMissing = allMissing && missing;
            keystring::appendValue(key, missing ? null : st[i].value, pattern_.fields[i].second,
                                   opts_.collator);
        }
        if (opts_.sparse && allMissing) return;
        keys_.push_back(std::move(key));
    }

    const IndexKeyPattern& pattern_;
    const KeyGenOptions& opts_;
    std::vector<std::vector<std::string>> paths_;
    std::vector<std::string> keys_;
    bool multikey_ = false;
};

// ---- type brackets ----------------------------------------------------------

uint8_t kEmptyDocBytes[5] = {5, 0, 0, 0, 0};
char kEmptyCString[1] = {'\0'};

bson_value_t emptyDocLike(bson_type_t t) {
    bson_value_t v = makeValue(t);
    v.value.v_doc.data = kEmptyDocBytes;
    v.value.v_doc.data_len = sizeof kEmptyDocBytes;
    return v;
}

bson_value_t numberValue(double d) {
    bson_value_t v = makeValue(BSON_TYPE_DOUBLE);
    v.value.v_double = d;
    return v;
}

bson_value_t minOfRank(bson_type_t t) {
    bson_value_t v = makeValue(t);
    switch (t) {
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DECIMAL128:
            return numberValue(NAN);
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL:
            v = makeValue(BSON_TYPE_UTF8);
            v.value.v_utf8.str = kEmptyCString;
            return v;
        case BSON_TYPE_DOCUMENT:
        case BSON_TYPE_ARRAY:
            return emptyDocLike(t);
        case BSON_TYPE_BINARY:
            return v;  // length 0, subtype 0
        case BSON_TYPE_OID:
            return v;  // all zero bytes
        case BSON_TYPE_BOOL:
            return v;  // false
        case BSON_TYPE_DATE_TIME:
            v.value.v_datetime = INT64_MIN;
            return v;
        case BSON_TYPE_TIMESTAMP:
            return v;
        case BSON_TYPE_REGEX:
            v.value.v_regex.regex = kEmptyCString;
            v.value.v_regex.options = kEmptyCString;
            return v;
        case BSON_TYPE_DBPOINTER:
            v.value.v_dbpointer.collection = kEmptyCString;
            return v;
        case BSON_TYPE_CODE:
            v.value.v_code.code = kEmptyCString;
            return v;
        case BSON_TYPE_CODEWSCOPE:
            v.value.v_codewscope.code = kEmptyCString;
            v.value.v_codewscope.scope_data = kEmptyDocBytes;
            v.value.v_codewscope.scope_len = sizeof kEmptyDocBytes;
            return v;
        default:
            return v;  // MinKey, MaxKey, null, undefined: the only value
    }
}

}  // namespace

std::vector<bool> IndexKeyPattern::directions() const {
    std::vector<bool> d;
    d.reserve(fields.size());
    for (const auto& f : fields) d.push_back(f.second);
    return d;
}

StatusWith<IndexKeyPattern> parseKeyPattern(const bson_t* key) {
    IndexKeyPattern p;
    bson_iter_t it;
    if (!key || !bson_iter_init(&it, key) || bson_count_keys(key) == 0) {
        return Status(ErrorCode::CannotCreateIndex, "Index keys cannot be empty.");
    }
    while (bson_iter_next(&it)) {
        std::string name = bson_iter_key(&it);
        const bson_value_t* v = bson_iter_value(&it);
        if (v->value_type == BSON_TYPE_UTF8) {
            std::string plugin(v->value.v_utf8.str, v->value.v_utf8.len);
            if (isKnownSpecialIndexType(plugin)) {
                return Status(ErrorCode::CannotCreateIndex,
                              fmt::format("Index type '{}' is not supported", plugin));
            }
            return Status(ErrorCode::CannotCreateIndex,
                          fmt::format("Unknown index plugin '{}'", plugin));
        }
        if (!bson::isNumber(v->value_type)) {
            return Status(ErrorCode::CannotCreateIndex,
                          fmt::format("Values in v:2 index key pattern cannot be of type {}. Only "
                                      "numbers > 0, numbers < 0, and strings are allowed.",
                                      bson::typeName(v->value_type)));
        }
        double d = bson::toDouble(*v);
        if (std::isnan(d)) {
            return Status(ErrorCode::CannotCreateIndex,
                          "Values in the index key pattern can't be NaN.");
        }
        if (d == 0) {
            return Status(ErrorCode::CannotCreateIndex,
                          "Values in the index key pattern can't be 0.");
        }
        if (name == "$**" || (name.size() > 4 && name.ends_with(".$**"))) {
            return Status(ErrorCode::CannotCreateIndex, "Index type 'wildcard' is not supported");
        }
        Status s = validatePath(name);
        if (!s.isOK()) return s;
        p.fields.emplace_back(std::move(name), d < 0);
    }
    return p;
}

Status generateKeys(const bson_t* doc, const IndexKeyPattern& p, const KeyGenOptions& o,
                    std::vector<std::string>* keys, bool* multikey) {
    KeyGenerator gen(p, o);
    FieldState root;
    root.kind = FieldState::kPending;
    root.value = makeValue(BSON_TYPE_DOCUMENT);
    root.value.value.v_doc.data = const_cast<uint8_t*>(bson_get_data(doc));
    root.value.value.v_doc.data_len = doc->len;
    std::vector<FieldState> st(p.fields.size(), root);
    Status s = gen.run(std::move(st));
    if (multikey) *multikey = gen.multikey();
    if (!s.isOK()) return s;
    *keys = gen.takeKeys();
    return Status::OK();
}

std::string encodeKey(const IndexKeyPattern& p, std::span<const bson_value_t> values,
                      const bson::StringComparator* coll) {
    HALO_INVARIANT(values.size() <= p.fields.size());
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) {
        keystring::appendValue(out, values[i], p.fields[i].second, coll);
    }
    return out;
}

bool ValueInterval::empty() const {
    int c = bson::compareValues(lo, hi);
    return c > 0 || (c == 0 && !(loInclusive && hiInclusive));
}

ValueInterval typeBracket(bson_type_t t) {
    ValueInterval iv;
    iv.lo = minOfRank(t);
    switch (t) {
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DECIMAL128:
            iv.hi = numberValue(INFINITY);
            break;
        case BSON_TYPE_UTF8:
        case BSON_TYPE_SYMBOL:
            iv.hi = minOfRank(BSON_TYPE_DOCUMENT);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_DOCUMENT:
            iv.hi = minOfRank(BSON_TYPE_ARRAY);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_ARRAY:
            iv.hi = minOfRank(BSON_TYPE_BINARY);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_BINARY:
            iv.hi = minOfRank(BSON_TYPE_OID);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_OID:
            iv.hi = makeValue(BSON_TYPE_OID);
            std::memset(iv.hi.value.v_oid.bytes, 0xFF, 12);
            break;
        case BSON_TYPE_BOOL:
            iv.hi = makeValue(BSON_TYPE_BOOL);
            iv.hi.value.v_bool = true;
            break;
        case BSON_TYPE_DATE_TIME:
            iv.hi = makeValue(BSON_TYPE_DATE_TIME);
            iv.hi.value.v_datetime = INT64_MAX;
            break;
        case BSON_TYPE_TIMESTAMP:
            iv.hi = makeValue(BSON_TYPE_TIMESTAMP);
            iv.hi.value.v_timestamp.timestamp = UINT32_MAX;
            iv.hi.value.v_timestamp.increment = UINT32_MAX;
            break;
        case BSON_TYPE_REGEX:
            iv.hi = minOfRank(BSON_TYPE_DBPOINTER);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_DBPOINTER:
            iv.hi = minOfRank(BSON_TYPE_CODE);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_CODE:
            iv.hi = minOfRank(BSON_TYPE_CODEWSCOPE);
            iv.hiInclusive = false;
            break;
        case BSON_TYPE_CODEWSCOPE:
            iv.hi = makeValue(BSON_TYPE_MAXKEY);
            iv.hiInclusive = false;
            break;
        default:
            iv.hi = iv.lo;
            break;  // MinKey, MaxKey, null, undefined
    }
    return iv;
}

ValueInterval allValues() {
    ValueInterval iv;
    iv.lo = makeValue(BSON_TYPE_MINKEY);
    iv.hi = makeValue(BSON_TYPE_MAXKEY);
    return iv;
}

ValueInterval pointInterval(const bson_value_t& v) {
    ValueInterval iv;
    iv.lo = v;
    iv.hi = v;
    return iv;
}

ValueInterval comparisonInterval(ComparisonOp op, const bson_value_t& v) {
    const bool lower = op == ComparisonOp::kGt || op == ComparisonOp::kGte;  // v is the lower end
    const bool inclusive = op == ComparisonOp::kGte || op == ComparisonOp::kLte;
    ValueInterval iv;
    if (v.value_type == BSON_TYPE_MINKEY || v.value_type == BSON_TYPE_MAXKEY) {
        iv = allValues();
    } else if (bson::isNumber(v.value_type)) {
        bson_value_t nan = numberValue(NAN);
        if (bson::compareValues(v, nan) == 0) {
            iv = pointInterval(v);
            iv.loInclusive = iv.hiInclusive = inclusive;
            return iv;
        }
        iv.lo = numberValue(-INFINITY);
        iv.hi = numberValue(INFINITY);
    } else {
        iv = typeBracket(v.value_type);
    }
    if (lower) {
        iv.lo = v;
        iv.loInclusive = inclusive;
    } else {
        iv.hi = v;
        iv.hiInclusive = inclusive;
    }
    return iv;
}

KeyRange keyRange(const IndexKeyPattern& p, std::span<const bson_value_t> eqPrefix,
                  const ValueInterval& iv) {
    HALO_INVARIANT(eqPrefix.size() < p.fields.size());
    std::string prefix = encodeKey(p, eqPrefix);
    if (iv.empty()) return {prefix, prefix};
    const bool desc = p.fields[eqPrefix.size()].second;
    std::string lo = prefix, hi = prefix;
    keystring::appendValue(lo, iv.lo, desc);
    keystring::appendValue(hi, iv.hi, desc);
    // In byte order a descending component runs from hi down to lo.
    const std::string& first = desc ? hi : lo;
    const std::string& last = desc ? lo : hi;
    const bool firstIncl = desc ? iv.hiInclusive : iv.loInclusive;
    const bool lastIncl = desc ? iv.loInclusive : iv.hiInclusive;
    KeyRange r;
    r.start = firstIncl ? first : keystring::afterPrefix(first);
    r.end = lastIncl ? keystring::afterPrefix(last) : last;
    return r;
}

KeyRange keyRangeForPrefix(const IndexKeyPattern& p, std::span<const bson_value_t> values) {
    std::string prefix = encodeKey(p, values);
    return {prefix, keystring::afterPrefix(prefix)};
}

}  // namespace halo::store
