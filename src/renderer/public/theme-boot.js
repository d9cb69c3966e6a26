// Sets the theme before the first paint (no dark flash on a light system). A file, not an inline
// script, so the page's CSP can stay `script-src 'self'`.
;(function () {
  var choice = null
  try {
    choice = localStorage.getItem('corral.theme')
  } catch (e) {}
  var light = choice === 'light' || ((choice === null || choice === 'system') && window.matchMedia('(prefers-color-scheme: light)').matches)
  document.documentElement.dataset.theme = light ? 'light' : 'dark'
})()
