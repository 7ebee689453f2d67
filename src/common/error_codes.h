#pragma once
// MongoDB error codes: the numbers mongod sends on the wire (see MongoDB's
// src/mongo/base/error_codes.yml). Only the codes Halocline produces are listed.
#include <string_view>

namespace halo {

#define HALO_ERROR_CODES(X)                               \
    X(OK, 0)                                              \
    X(InternalError, 1)                                   \
    X(BadValue, 2)                                        \
    X(NoSuchKey, 4)                                       \
    X(FailedToParse, 9)                                   \
    X(Unauthorized, 13)                                   \
    X(TypeMismatch, 14)                                   \
    X(Overflow, 15)                                       \
    X(InvalidLength, 16)                                  \
    X(ProtocolError, 17)                                  \
    X(IllegalOperation, 20)                               \
    X(InvalidBSON, 22)                                    \
    X(NamespaceNotFound, 26)                              \
    X(IndexNotFound, 27)                                  \
    X(PathNotViable, 28)                                  \
    X(ConflictingUpdateOperators, 40)                     \
    X(CursorNotFound, 43)                                 \
    X(NamespaceExists, 48)                                \
    X(MaxTimeMSExpired, 50)                               \
    X(DollarPrefixedFieldName, 52)                        \
    X(InvalidIdField, 53)                                 \
    X(NotSingleValueField, 54)                            \
    X(EmptyFieldName, 56)                                 \
    X(DottedFieldName, 57)                                \
    X(CommandNotFound, 59)                                \
    X(ImmutableField, 66)                                 \
    X(CannotCreateIndex, 67)                              \
    X(IndexAlreadyExists, 68)                             \
    X(InvalidOptions, 72)                                 \
    X(InvalidNamespace, 73)                               \
    X(IndexOptionsConflict, 85)                           \
    X(IndexKeySpecsConflict, 86)                          \
    X(OperationFailed, 96)                                \
    X(WriteConflict, 112)                                 \
    X(CommandNotSupported, 115)                           \
    X(NotYetInitialized, 94)                              \
    X(CommandFailed, 125)                                 \
    X(CappedPositionLost, 136)                            \
    X(ConflictingOperationInProgress, 117)                \
    X(InvalidUUID, 207)                                   \
    X(NoSuchTransaction, 251)                             \
    X(TransactionCommitted, 256)                          \
    X(TransactionTooLarge, 257)                           \
    X(OperationNotSupportedInTransaction, 263)            \
    X(ChangeStreamFatalError, 280)                        \
    X(ChangeStreamHistoryLost, 286)                       \
    X(QueryExceededMemoryLimitNoDiskUseAllowed, 292)      \
    X(InvalidIndexSpecificationOption, 197)               \
    X(CannotIndexParallelArrays, 171)                     \
    X(Location16746, 16746)                               \
    X(Location16410, 16410)                               \
    X(Location31254, 31254)                               \
    X(BSONObjectTooLarge, 10334)                          \
    X(DuplicateKey, 11000)                                \
    X(InterruptedAtShutdown, 11600)                       \
    X(NotWritablePrimary, 10107)                          \
    X(Location15974, 15974)                               \
    X(Location17276, 17276)                               \
    X(Location31253, 31253)                               \
    X(Location40352, 40352)                               \
    X(Location40353, 40353)                               \
    X(Location40414, 40414)                               \
    X(Location51024, 51024)                               \
    X(Location16020, 16020)                               \
    X(Location15998, 15998)                               \
    X(Location17261, 17261)                               \
    X(Location40323, 40323)                               \
    X(Location40324, 40324)                               \
    X(Location15952, 15952)                               \
    X(Location16436, 16436)                               \
    X(Location40234, 40234)                               \
    X(Location28667, 28667)                               \
    X(Location16554, 16554)                               \
    X(Location16555, 16555)                               \
    X(Location16006, 16006)                               \
    X(Location28765, 28765)                               \
    X(Location40390, 40390)                               \
    X(Location15983, 15983)                               \
    X(Location31324, 31324)                               \
    X(Location40571, 40571)                               \
    X(QueryPlanKilled, 175)                               \
    X(Location40415, 40415)

enum class ErrorCode : int {
#define HALO_X(name, num) name = num,
    HALO_ERROR_CODES(HALO_X)
#undef HALO_X
};

/// The codeName mongod sends for `code` ("Location<N>" for unnamed codes).
std::string_view codeName(ErrorCode code);

}  // namespace halo
