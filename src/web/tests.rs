//! Unit tests of the web adapter's pieces: sanitised rendering, token comparison, the session
//! cookie's attributes, the session store's cap.

use super::auth::{Sessions, session_cookie, tokens_equal};
use super::render::note_html;

#[test]
fn rendering_keeps_markdown_and_makes_html_scripts_handlers_and_javascript_links_inert() {
    let html = note_html(
        "# Head\n\n*em* [ok](https://example.com) [bad](javascript:alert(1)) [data](data:text/html,x)\n\n\
         <script>alert(1)</script>\n\n<b onclick=\"alert(1)\">bold</b> <img src=x onerror=alert(1)>\n",
    )
    .into_string();
    assert!(html.contains("<h1>Head</h1>") && html.contains("<em>em</em>"), "{html}");
    assert!(html.contains("href=\"https://example.com\""), "{html}");
    // Escaped text never holds '<': every '<' opens real markup.
    for tag in html.split('<').skip(1).map(|rest| rest.split('>').next().unwrap_or("")) {
        let name = tag.trim_start_matches('/').split([' ', '/']).next().unwrap_or("");
        assert!(["h1", "p", "em", "a"].contains(&name), "unexpected markup <{tag}> in {html}");
        assert!(!tag.contains(" on") && !tag.contains("javascript:") && !tag.contains("data:"), "<{tag}> in {html}");
    }
    assert!(html.contains("&lt;script&gt;"), "raw HTML is shown as text: {html}");
}

#[test]
fn tokens_compare_equal_only_when_identical() {
    assert!(tokens_equal("abc", "abc"));
    assert!(!tokens_equal("abc", "abd"));
    assert!(!tokens_equal("abc", "abcd"));
    assert!(!tokens_equal("", "a"));
}

#[test]
fn the_session_cookie_is_http_only_same_site_strict_and_secure_off_loopback() {
    let local = session_cookie("id1", false);
    assert!(local.starts_with("paravault_session=id1"));
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(local.contains(attribute), "{local}");
    }
    assert!(!local.contains("Secure"));
    assert!(session_cookie("id1", true).contains("Secure"));
    assert!(session_cookie("", false).contains("Max-Age=0"), "logout clears the cookie");
}

#[test]
fn sessions_have_fresh_ids_and_tokens_and_end_when_removed() {
    let sessions = Sessions::default();
    let (a, first) = sessions.create(None);
    let (b, second) = sessions.create(None);
    assert_ne!(a, b);
    assert_ne!(first.csrf, second.csrf);
    assert_eq!((a.len(), first.csrf.len()), (64, 64));
    assert!(sessions.get(&a).is_some());
    sessions.remove(&a);
    assert!(sessions.get(&a).is_none());
    assert!(sessions.get("not a session").is_none());
}

#[test]
fn shown_escapes_hidden_characters_in_markup() {
    use super::render::Shown;
    let html = maud::html! { pre { (Shown("curl x | sh\x1b[1A\r\u{202e}<b>&\u{200b}")) } }.into_string();
    assert_eq!(
        html,
        "<pre>curl x | sh<span class=\"esc\">\\u{1b}</span>[1A<span class=\"esc\">\\u{d}</span><span class=\"esc\">\\u{202e}</span>&lt;b&gt;&amp;<span class=\"esc\">\\u{200b}</span></pre>"
    );
    assert!(!html.chars().any(crate::note::visible::hidden), "{html:?}");
}
