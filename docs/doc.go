// Package docs holds no code: its test checks the repository's Markdown.
// Every relative link and every repository path named in backticks in
// README.md, docs/*.md and deploy/**/*.md must exist (anchors included),
// and every page of docs/ must be reachable from the README.
package docs
