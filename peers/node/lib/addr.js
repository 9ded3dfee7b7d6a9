'use strict';

// formatAddress prints a listening address as HOST:PORT, IPv6 in brackets.
function formatAddress(a) {
  const v6 = a.family === 'IPv6' || a.family === 6 || a.addressType === 6;
  return v6 ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

module.exports = { formatAddress };
