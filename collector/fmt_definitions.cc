// fmt's compiled part, for the injected library alone, which must not need libfmt.so
// (collector/README.md, "Dropping into any process"). Without FMT_HEADER_ONLY,
// format-inl.h's functions are ordinary out-of-line definitions in the one file that
// includes it; the templates that fmt's headers declare but leave to the compiled library
// (floats, locales) are instantiated below. The rest of the project links libfmt.so.
#include <fmt/format-inl.h>

#include <locale>

// The instantiations below are fmt 9's list (Debian 12's libfmt-dev 9.1).
static_assert(FMT_VERSION / 10000 == 9, "fmt's compiled templates changed: check the list below against fmt's src/format.cc");

namespace fmt {
inline namespace v9 {
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template locale_ref::locale_ref(const std::locale& locale);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl(locale_ref locale) -> thousands_sep_result<char>;
template auto thousands_sep_impl(locale_ref locale) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl(locale_ref locale) -> char;
template auto decimal_point_impl(locale_ref locale) -> wchar_t;

}  // namespace detail
}  // namespace v9
}  // namespace fmt
