// Sluice console: copy buttons. A button with data-copy="#id" copies the
// text of that element. Works without the async clipboard API (plain-HTTP
// consoles) by selecting the text and using execCommand.
(function () {
  "use strict";
  function copy(btn) {
    var el = document.querySelector(btn.getAttribute("data-copy"));
    if (!el) { return; }
    var text = el.textContent;
    var done = function () {
      var was = btn.textContent;
      btn.textContent = "Copied";
      btn.classList.add("copied");
      setTimeout(function () { btn.textContent = was; btn.classList.remove("copied"); }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(el, done); });
    } else {
      fallback(el, done);
    }
  }
  function fallback(el, done) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try { if (document.execCommand("copy")) { done(); } } catch (e) { /* the text stays selected for Ctrl+C */ }
  }
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("button[data-copy]");
    if (btn) { ev.preventDefault(); copy(btn); }
  });
})();
