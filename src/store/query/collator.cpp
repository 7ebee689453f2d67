#include "store/query/collator.h"

#include <fmt/format.h>
#include <unicode/coll.h>
#include <unicode/locid.h>
#include <unicode/stringpiece.h>
#include <unicode/unistr.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace halo::query {

struct Collator::Impl {
    std::unique_ptr<icu::Collator> icu;
};

namespace {

// ---- mongod's rendering of a BSON document in messages ({ a: 1, b: "x" }) ----

std::string shellValue(const bson_value_t& v);

std::string shellDoc(const bson_t* d) {
    bson_iter_t it;
    if (!bson_iter_init(&it, d)) return "{}";
    std::string out = "{";
    bool first = true;
    while (bson_iter_next(&it)) {
        out += first ? " " : ", ";
        first = false;
        out += bson_iter_key(&it);
        out += ": ";
        out += shellValue(*bson_iter_value(&it));
    }
    out += first ? "}" : " }";
    return out;
}

std::string shellValue(const bson_value_t& v) {
    switch (v.value_type) {
        case BSON_TYPE_UTF8:
            return fmt::format("\"{}\"", std::string_view(v.value.v_utf8.str, v.value.v_utf8.len));
        case BSON_TYPE_INT32:
            return std::to_string(v.value.v_int32);
        case BSON_TYPE_INT64:
            return std::to_string(v.value.v_int64);
        case BSON_TYPE_DOUBLE: {
            double d = v.value.v_double;
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15)
                return fmt::format("{}.0", static_cast<int64_t>(d));
            return fmt::format("{}", d);
        }
        case BSON_TYPE_BOOL:
            return v.value.v_bool ? "true" : "false";
        case BSON_TYPE_NULL:
            return "null";
        case BSON_TYPE_DOCUMENT: {
            bson_t sub;
            if (bson_init_static(&sub, v.value.v_doc.data, v.value.v_doc.data_len))
                return shellDoc(&sub);
            return "{}";
        }
        default:
            return bson::valueToString(v);
    }
}

// ---- bsonExtract*Field equivalents (mongod's codes and messages) ----

/// 0: absent, 1: present (value in *out), error otherwise.
Status extractString(const bson_t* spec, const char* field, std::string* out, bool* present) {
    bson_iter_t it;
    *present = false;
    if (!bson_iter_init_find(&it, spec, field)) return Status::OK();
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return {ErrorCode::TypeMismatch,
                fmt::format("\"{}\" had the wrong type. Expected string, found {}", field,
                            bson::typeName(bson_iter_type(&it)))};
    uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    out->assign(s, len);
    *present = true;
    return Status::OK();
}

Status extractBool(const bson_t* spec, const char* field, bool* out, bool* present) {
    bson_iter_t it;
    *present = false;
    if (!bson_iter_init_find(&it, spec, field)) return Status::OK();
    if (!BSON_ITER_HOLDS_BOOL(&it))
        return {ErrorCode::TypeMismatch,
                fmt::format("\"{}\" had the wrong type. Expected bool, found {}", field,
                            bson::typeName(bson_iter_type(&it)))};
    *out = bson_iter_bool(&it);
    *present = true;
    return Status::OK();
}

Status extractInteger(const bson_t* spec, const char* field, int64_t* out, bool* present) {
    bson_iter_t it;
    *present = false;
    if (!bson_iter_init_find(&it, spec, field)) return Status::OK();
    const bson_value_t* v = bson_iter_value(&it);
    if (!bson::isNumber(v->value_type))
        return {ErrorCode::TypeMismatch,
                fmt::format("Expected field \"{}\" to have numeric type, but found {}", field,
                            bson::typeName(v->value_type))};
    if (!bson::toInt64Exact(*v, out))
        return {ErrorCode::BadValue,
                fmt::format("Expected field \"{}\" to have a value exactly representable as a "
                            "64-bit integer, but found {}: {}",
                            field, field, shellValue(*v))};
    *present = true;
    return Status::OK();
}

UColAttributeValue onOff(bool b) {
    return b ? UCOL_ON : UCOL_OFF;
}

std::string specString(const CollationSpec& s) {
    return fmt::format(
        "{{ locale: \"{}\", caseLevel: {}, caseFirst: \"{}\", strength: {}, numericOrdering: {}, "
        "alternate: \"{}\", maxVariable: \"{}\", normalization: {}, backwards: {}, version: "
        "\"{}\" }}",
        s.locale, s.caseLevel, s.caseFirst, s.strength, s.numericOrdering, s.alternate,
        s.maxVariable, s.normalization, s.backwards, s.version);
}

}  // namespace

Collator::Collator(std::unique_ptr<Impl> impl, CollationSpec spec)
    : impl_(std::move(impl)), spec_(std::move(spec)) {}

Collator::~Collator() = default;

StatusWith<std::shared_ptr<const Collator>> Collator::parse(const bson_t* spec) {
    const std::string shown = shellDoc(spec);
    std::string locale;
    bool present = false;
    if (Status st = extractString(spec, "locale", &locale, &present); !st.isOK()) return st;
    if (!present) return {ErrorCode::NoSuchKey, "Missing expected field \"locale\""};
    if (locale.find('\0') != std::string::npos)
        return {ErrorCode::BadValue,
                fmt::format("Field 'locale' cannot contain null byte. Collation spec: {}", shown)};
    if (locale == "simple") {
        if (bson_count_keys(spec) > 1)
            return {
                ErrorCode::FailedToParse,
                fmt::format("If locale=simple, no other fields should be present in: {}", shown)};
        return std::shared_ptr<const Collator>();
    }

    icu::Locale userLocale = icu::Locale::createFromName(locale.c_str());
    if (userLocale.isBogus())
        return {ErrorCode::BadValue, fmt::format("Field 'locale' is not valid in: {}", shown)};
    UErrorCode err = U_ZERO_ERROR;
    auto impl = std::make_unique<Impl>();
    impl->icu.reset(icu::Collator::createInstance(userLocale, err));
    if (U_FAILURE(err) || !impl->icu)
        return {ErrorCode::OperationFailed,
                fmt::format("Failed to create collator: {}. Collation spec: {}", u_errorName(err),
                            shown)};
    icu::Collator& c = *impl->icu;

    // The locale must be one ICU has collation data for, exactly as named.
    err = U_ZERO_ERROR;
    icu::Locale valid = c.getLocale(ULOC_VALID_LOCALE, err);
    if (locale.empty())
        return {ErrorCode::BadValue,
                fmt::format("Field 'locale' cannot be the empty string in: {}", shown)};
    std::string validName = U_SUCCESS(err) ? valid.getName() : "";
    if (validName.empty() && locale == "root") validName = "root";
    if (locale != validName) {
        std::string msg = fmt::format("Field 'locale' is invalid in: {}", shown);
        if (!validName.empty() && validName != "root")
            msg += fmt::format(". Did you mean '{}'?", validName);
        return {ErrorCode::BadValue, std::move(msg)};
    }

    CollationSpec out;
    out.locale = locale == "root" ? "root" : userLocale.getName();
    int parsed = 1;
    auto attr = [&](UColAttribute a) {
        UErrorCode e = U_ZERO_ERROR;
        return c.getAttribute(a, e);
    };
    auto set = [&](UColAttribute a, UColAttributeValue v) {
        UErrorCode e = U_ZERO_ERROR;
        c.setAttribute(a, v, e);
    };

    // caseLevel
    if (Status st = extractBool(spec, "caseLevel", &out.caseLevel, &present); !st.isOK()) return st;
    if (present) {
        ++parsed;
        set(UCOL_CASE_LEVEL, onOff(out.caseLevel));
    } else {
        out.caseLevel = attr(UCOL_CASE_LEVEL) == UCOL_ON;
    }

    // caseFirst
    std::string caseFirst;
    if (Status st = extractString(spec, "caseFirst", &caseFirst, &present); !st.isOK()) return st;
    if (present) {
        ++parsed;
        UColAttributeValue v;
        if (caseFirst == "upper") {
            v = UCOL_UPPER_FIRST;
        } else if (caseFirst == "lower") {
            v = UCOL_LOWER_FIRST;
        } else if (caseFirst == "off") {
            v = UCOL_OFF;
        } else {
            return {ErrorCode::FailedToParse,
                    fmt::format("Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: {}",
                                caseFirst)};
        }
        out.caseFirst = caseFirst;
        set(UCOL_CASE_FIRST, v);
    } else {
        auto v = attr(UCOL_CASE_FIRST);
        out.caseFirst = v == UCOL_UPPER_FIRST ? "upper" : (v == UCOL_LOWER_FIRST ? "lower" : "off");
    }

    // strength
    int64_t strength = 0;
    if (Status st = extractInteger(spec, "strength", &strength, &present); !st.isOK()) return st;
    if (present) {
        ++parsed;
        UColAttributeValue v;
        switch (strength) {
            case 1:
                v = UCOL_PRIMARY;
                break;
            case 2:
                v = UCOL_SECONDARY;
                break;
            case 3:
                v = UCOL_TERTIARY;
                break;
            case 4:
                v = UCOL_QUATERNARY;
                break;
            case 5:
                v = UCOL_IDENTICAL;
                break;
            default:
                return {ErrorCode::FailedToParse,
                        fmt::format("Field 'strength' must be an integer 1 through 5. Got: {}",
                                    strength)};
        }
        out.strength = static_cast<int>(strength);
        set(UCOL_STRENGTH, v);
    } else {
        switch (attr(UCOL_STRENGTH)) {
            case UCOL_PRIMARY:
                out.strength = 1;
                break;
            case UCOL_SECONDARY:
                out.strength = 2;
                break;
            case UCOL_QUATERNARY:
                out.strength = 4;
                break;
            case UCOL_IDENTICAL:
                out.strength = 5;
                break;
            default:
                out.strength = 3;
                break;
        }
    }

    // numericOrdering
    if (Status st = extractBool(spec, "numericOrdering", &out.numericOrdering, &present);
        !st.isOK())
        return st;
    if (present) {
        ++parsed;
        set(UCOL_NUMERIC_COLLATION, onOff(out.numericOrdering));
    } else {
        out.numericOrdering = attr(UCOL_NUMERIC_COLLATION) == UCOL_ON;
    }

    // alternate
    std::string alternate;
    if (Status st = extractString(spec, "alternate", &alternate, &present); !st.isOK()) return st;
    if (present) {
        ++parsed;
        if (alternate == "non-ignorable") {
            set(UCOL_ALTERNATE_HANDLING, UCOL_NON_IGNORABLE);
        } else if (alternate == "shifted") {
            set(UCOL_ALTERNATE_HANDLING, UCOL_SHIFTED);
        } else {
            return {ErrorCode::FailedToParse,
                    fmt::format("Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: {}",
                                alternate)};
        }
        out.alternate = alternate;
    } else {
        out.alternate = attr(UCOL_ALTERNATE_HANDLING) == UCOL_SHIFTED ? "shifted" : "non-ignorable";
    }

    // maxVariable
    std::string maxVariable;
    if (Status st = extractString(spec, "maxVariable", &maxVariable, &present); !st.isOK())
        return st;
    if (present) {
        ++parsed;
        UColReorderCode code;
        if (maxVariable == "punct") {
            code = UCOL_REORDER_CODE_PUNCTUATION;
        } else if (maxVariable == "space") {
            code = UCOL_REORDER_CODE_SPACE;
        } else {
            return {ErrorCode::FailedToParse,
                    fmt::format("Field 'maxVariable' must be 'punct' or 'space'. Got: {}",
                                maxVariable)};
        }
        out.maxVariable = maxVariable;
        UErrorCode e = U_ZERO_ERROR;
        c.setMaxVariable(code, e);
    } else {
        out.maxVariable = c.getMaxVariable() == UCOL_REORDER_CODE_SPACE ? "space" : "punct";
    }

    // normalization
    if (Status st = extractBool(spec, "normalization", &out.normalization, &present); !st.isOK())
        return st;
    if (present) {
        ++parsed;
        set(UCOL_NORMALIZATION_MODE, onOff(out.normalization));
    } else {
        out.normalization = attr(UCOL_NORMALIZATION_MODE) == UCOL_ON;
    }

    // backwards
    if (Status st = extractBool(spec, "backwards", &out.backwards, &present); !st.isOK()) return st;
    if (present) {
        ++parsed;
        set(UCOL_FRENCH_COLLATION, onOff(out.backwards));
    } else {
        out.backwards = attr(UCOL_FRENCH_COLLATION) == UCOL_ON;
    }

    // version
    out.version = std::string(kVersion);
    std::string version;
    if (Status st = extractString(spec, "version", &version, &present); !st.isOK()) return st;
    if (present) {
        if (version != kVersion)
            return {ErrorCode::IncompatibleCollationVersion,
                    fmt::format("Requested collation version {} but the only available collator "
                                "version was {}. Requested collation spec: {}",
                                version, kVersion, shown)};
        ++parsed;
    }

    if (parsed < static_cast<int>(bson_count_keys(spec)))
        return {ErrorCode::FailedToParse,
                fmt::format("Collation spec contains unknown field. Collation spec: {}", shown)};

    if (out.backwards && out.strength == 1)
        return {ErrorCode::BadValue,
                fmt::format("'backwards' is invalid with 'strength' of 1 in: {}", specString(out))};
    if (out.caseFirst != "off" && !out.caseLevel && out.strength < 3)
        return {ErrorCode::BadValue,
                fmt::format("'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is "
                            "greater than 2 in: {}",
                            specString(out))};

    return std::shared_ptr<const Collator>(new Collator(std::move(impl), std::move(out)));
}

int Collator::compare(std::string_view a, std::string_view b) const {
    UErrorCode err = U_ZERO_ERROR;
    UCollationResult r =
        impl_->icu->compareUTF8(icu::StringPiece(a.data(), static_cast<int32_t>(a.size())),
                                icu::StringPiece(b.data(), static_cast<int32_t>(b.size())), err);
    if (U_FAILURE(err)) {
        // Not reachable for in-memory input; fall back to a total order.
        int c = a.compare(b);
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    return r == UCOL_LESS ? -1 : (r == UCOL_GREATER ? 1 : 0);
}

std::string Collator::comparisonKey(std::string_view s) const {
    icu::UnicodeString u =
        icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
    uint8_t small[256];
    int32_t n = impl_->icu->getSortKey(u, small, sizeof small);
    std::string out;
    if (n <= static_cast<int32_t>(sizeof small)) {
        out.assign(reinterpret_cast<const char*>(small), static_cast<size_t>(n));
    } else {
        std::vector<uint8_t> big(static_cast<size_t>(n));
        n = impl_->icu->getSortKey(u, big.data(), n);
        out.assign(reinterpret_cast<const char*>(big.data()), static_cast<size_t>(n));
    }
    // ICU terminates sort keys with one NUL, the only NUL they contain.
    if (!out.empty() && out.back() == '\0') out.pop_back();
    return out;
}

void Collator::appendTo(bson_t* out, std::string_view field) const {
    bson_t d;
    bson_append_document_begin(out, field.data(), static_cast<int>(field.size()), &d);
    BSON_APPEND_UTF8(&d, "locale", spec_.locale.c_str());
    BSON_APPEND_BOOL(&d, "caseLevel", spec_.caseLevel);
    BSON_APPEND_UTF8(&d, "caseFirst", spec_.caseFirst.c_str());
    BSON_APPEND_INT32(&d, "strength", spec_.strength);
    BSON_APPEND_BOOL(&d, "numericOrdering", spec_.numericOrdering);
    BSON_APPEND_UTF8(&d, "alternate", spec_.alternate.c_str());
    BSON_APPEND_UTF8(&d, "maxVariable", spec_.maxVariable.c_str());
    BSON_APPEND_BOOL(&d, "normalization", spec_.normalization);
    BSON_APPEND_BOOL(&d, "backwards", spec_.backwards);
    BSON_APPEND_UTF8(&d, "version", spec_.version.c_str());
    bson_append_document_end(out, &d);
}

bson::Doc Collator::toDoc() const {
    bson::Doc wrapper;
    appendTo(wrapper.mut(), "c");
    bson_t inner;
    bson::subDocument(wrapper.get(), "c", &inner);
    return bson::Doc::copyOf(&inner);
}

bool sameCollation(const Collator* a, const Collator* b) {
    if (a == b) return true;
    if (!a || !b) return false;
    return a->spec() == b->spec();
}

bool isSimpleCollationSpec(const bson_t* spec) {
    bson_iter_t it;
    if (bson_count_keys(spec) != 1 || !bson_iter_init_find(&it, spec, "locale") ||
        !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    return std::string_view(bson_iter_utf8(&it, nullptr)) == "simple";
}

}  // namespace halo::query
