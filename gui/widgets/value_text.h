// The viewer's values as text: base/format.h's functions returning QString, so that every
// tab writes a duration, a size, a percentage or escaped text exactly as the reports and
// `rankscope analyze` do ("1.50 ms" in the Details tab and in the Run tab alike).
#pragma once

#include <QString>

#include <cstdint>
#include <string>

#include "base/format.h"

namespace rankscope::gui {

inline QString DurationText(int64_t ns) { return QString::fromStdString(format::FormatDuration(static_cast<double>(ns))); }
inline QString BytesText(double bytes) { return QString::fromStdString(format::FormatBytes(bytes)); }
inline QString PercentText(double percent) { return QString::fromStdString(format::FormatPercent(percent)); }
// UTF-8 text for Qt's rich text (QLabel, QTextBrowser): format::HtmlEscape.
inline QString HtmlText(const std::string& text) { return QString::fromStdString(format::HtmlEscape(text)); }

}  // namespace rankscope::gui
